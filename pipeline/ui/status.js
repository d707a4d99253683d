// visiond status page: polls api/cameras, api/workers and api/memory every second and keeps one
// card per camera (added and removed as the daemon's cameras change), a row per worker and
// the memory by owner with the budget. Each card
// shown on screen lists the camera's recent clips (api/cameras/<id>/clips, every 10 s); a click
// plays one in the player above the cards (api/clips/<name>, which answers range requests, so
// the video seeks). A card's "live" button plays the camera's video as it comes in the same
// player (api/cameras/<id>/live: a WebSocket of fragmented MP4 for Media Source Extensions).
// While a camera plays live, its zones, lines and masks are drawn over it, and the editor
// (api/cameras/<id>/scene) draws new ones by clicks, shows the camera's YAML and what check
// says of it, and saves into the config file where http.edit allows.
// ?play=<clip name> plays that clip, muted, once a card lists it; ?live=<camera> watches that
// camera (&edit=1: with the editor open). Plain DOM, no external resources; text from the
// daemon is only ever set as text.
"use strict";

(() => {
  const POLL_MS = 1000;
  const CLIPS_MS = 10000; // a shown card's clip list: clips come every few minutes at most
  const CLIPS_SHOWN = 5;
  const grid = document.getElementById("cameras");
  const noCameras = document.getElementById("no-cameras");
  const workersBody = document.querySelector("#workers tbody");
  const memoryBody = document.querySelector("#memory tbody");
  const memoryBudget = document.getElementById("memory-budget");
  const conn = document.getElementById("conn");
  const summary = document.getElementById("summary");
  const cards = new Map(); // camera id -> card
  const params = new URLSearchParams(location.search);
  let autoplay = params.get("play"); // a clip to play once listed
  let autoEdit = params.get("edit") === "1"; // open the editor with ?live=
  const player = {
    root: document.getElementById("player"),
    title: document.getElementById("player-title"),
    video: document.getElementById("player-video"),
    info: document.getElementById("player-info"),
    name: "", // the clip playing, "" for none
  };
  // The live view: the camera watched, its socket, and the Media Source fed from it.
  const LIVE_QUEUE = 120; // segments waiting for the source buffer (about 12 s at 10 fps) before a restart
  const LIVE_BEHIND_S = 1.5; // the video jumps to the newest frame when it is further behind
  const LIVE_KEEP_S = 10; // video kept in the source buffer behind the play position
  const live = { camera: "", ws: null, source: null, buffer: null, queue: [], mime: "", start: 0, feed: null, scene: null, frames: [], drawn: 0, latency: 0, rvfc: 0, lastDrawn: null };
  const overlay = document.getElementById("player-overlay");
  const OVERLAY_KEEP = 100; // results kept to match frames on screen (10 s at 10 fps)
  const OVERLAY_MAX_AGE_MS = 400; // boxes older than this against the frame on screen are not drawn
  // The editor of the watched camera's zones, lines and masks (api/cameras/<id>/scene): a
  // draft of the scene, drawn over the video instead of the running one while it is open.
  const editor = {
    on: false, camera: "", version: "", editable: false, why: "",
    draft: null, // {zones, lines, masks}: each shape {id, points, classes}
    drawing: null, // the shape being drawn: {kind, index (-1: new), points}
    selected: null, // {kind, index}
    checkTimer: 0, mediaTime: 0,
  };
  const ed = (id) => document.getElementById(id);
  // Which cards are on screen: only their clip lists are polled.
  const onScreen = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const card = cards.get(e.target.dataset.camera);
      if (!card) continue;
      card.visible = e.isIntersecting;
      if (card.visible) refreshClips(card);
    }
  });

  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const num = (v) => (typeof v === "number" && isFinite(v) ? v : 0);
  const fmtMS = (v) => (num(v) >= 100 ? num(v).toFixed(0) : num(v).toFixed(1)) + " ms";
  const fmtBytes = (b) => (num(b) > 0 ? (num(b) / (1 << 20)).toFixed(0) + " MiB" : "–");
  const fmtTime = (s) => {
    const t = Date.parse(s);
    return isNaN(t) || new Date(t).getUTCFullYear() < 2000 ? "never" : new Date(t).toLocaleTimeString();
  };

  async function getJSON(url) {
    const r = await fetch(url, { cache: "no-store" });
    if (!r.ok) throw new Error(url + ": HTTP " + r.status);
    return r.json();
  }

  function newCard(id) {
    const root = el("article", "card");
    root.dataset.camera = id;
    root.dataset.snapshot = "none";
    const head = el("header");
    const state = el("span", "state");
    head.append(el("h3", "cam-id", id), state);
    const shot = el("div", "shot");
    const img = el("img");
    img.alt = "latest analysed frame of " + id;
    const placeholder = el("div", "placeholder", "no frame analysed yet");
    shot.append(img, placeholder);
    const reason = el("p", "reason");
    const stats = el("dl", "stats");
    const dd = {};
    for (const [key, label, title] of [
      ["fps", "fps", "frames analysed per second, recently / configured"],
      ["latency", "latency", "decoded to published, mean"],
      ["infer", "inference", "the model run in the worker, mean"],
      ["age", "frame age", "decoded to handed to a worker: mean / maximum in the last 10 s"],
      ["analysed", "analysed", "frames analysed and published"],
      ["detections", "detections", "objects detected"],
      ["dropped", "dropped", "frames lost: stale, source, worker lost, timeout, rejected, shutdown"],
      ["superseded", "superseded", "replaced by a newer frame before their turn (normal when the camera sends more fps than analysed)"],
      ["reconnects", "reconnects", "sessions opened after the first"],
    ]) {
      const pair = el("div");
      pair.title = title;
      dd[key] = el("dd", key);
      pair.append(el("dt", null, label), dd[key]);
      stats.append(pair);
    }
    const clips = el("ul", "clips");
    clips.setAttribute("aria-label", "recent clips of " + id);
    const url = el("footer", "url");
    const watch = el("button", "watch", "live");
    watch.type = "button";
    watch.title = "watch " + id + "'s video as it comes";
    watch.addEventListener("click", () => watchLive(id));
    head.append(watch);
    root.append(head, shot, reason, stats, clips, url);
    return {
      id, root, state, img, placeholder, reason, dd, clips, url,
      loading: false, // a snapshot request is in flight
      shown: -1, // frames_analysed when the shown snapshot was requested; -1: none shown
      visible: false, // on screen (onScreen)
      clipsLoading: false, // a clip list request is in flight
      clipsAt: 0, // when the last clip list was requested
    };
  }

  const fmtClipTime = (s) => {
    const t = new Date(Date.parse(s));
    if (isNaN(t)) return "?";
    return t.toDateString() === new Date().toDateString() ? t.toLocaleTimeString() : t.toLocaleString();
  };
  const clipLabels = (clip) => [...new Set((clip.objects || []).map((o) => String(o.label)))].join(", ") || "no objects";
  const clipURL = (name) => "api/clips/" + String(name).split("/").map(encodeURIComponent).join("/");

  // refreshClips asks for the recent clips of a card on screen (in a tab not hidden), at most
  // every CLIPS_MS; 503 (no clip store: JetStream off) hides the list.
  async function refreshClips(card) {
    if (!card.visible || document.hidden || card.clipsLoading || Date.now() - card.clipsAt < CLIPS_MS) return;
    card.clipsLoading = true;
    card.clipsAt = Date.now();
    try {
      const r = await fetch("api/cameras/" + encodeURIComponent(card.id) + "/clips?limit=" + CLIPS_SHOWN, { cache: "no-store" });
      if (r.status === 503) {
        card.root.dataset.clips = "off";
        card.clips.replaceChildren();
      } else if (r.ok) {
        renderClips(card, (await r.json()) || []);
      }
    } catch (e) {
      // the next poll asks again
    } finally {
      card.clipsLoading = false;
    }
  }

  function renderClips(card, clips) {
    card.root.dataset.clips = String(clips.length);
    if (clips.length === 0) {
      card.clips.replaceChildren(el("li", "none", "no clips yet"));
      return;
    }
    const items = clips.map((clip) => {
      const li = el("li");
      const b = el("button", "clip", fmtClipTime(clip.start) + " · " + num(clip.duration_s).toFixed(1) + " s · " + clipLabels(clip));
      b.type = "button";
      b.dataset.clip = clip.name;
      b.title = clip.name + (clip.closed ? " (" + clip.closed + ")" : "") + preRoll(clip) + ((clip.notes || []).length ? ": " + clip.notes.join("; ") : "");
      b.toggleAttribute("data-short", Boolean(clip.pre_roll_short));
      b.toggleAttribute("data-playing", clip.name === player.name);
      b.addEventListener("click", () => play(clip, b.dataset.muted === "1"));
      li.append(b);
      return li;
    });
    card.clips.replaceChildren(...items);
    if (autoplay) {
      const b = card.clips.querySelector('button[data-clip="' + CSS.escape(autoplay) + '"]');
      if (b) {
        autoplay = null;
        b.dataset.muted = "1"; // browsers play a muted video without a user's gesture
        b.click();
        delete b.dataset.muted;
      }
    }
  }

  // preRoll says, for a clip's title, the video it has before its first object, and why that
  // is less than pre_capture; or the clip it goes on from.
  function preRoll(clip) {
    if (clip.continues) return ", continues " + clip.continues;
    if (clip.pre_roll_s === undefined) return "";
    return ", pre-roll " + num(clip.pre_roll_s).toFixed(1) + " s of " + num(clip.pre_capture_s).toFixed(1) +
      (clip.pre_roll_short ? " (" + clip.pre_roll_short + ")" : "");
  }

  // play plays clip in the player, and marks it in its card's list.
  function play(clip, muted) {
    const v = player.video;
    stopPlayer();
    player.name = clip.name;
    player.root.hidden = false;
    player.info.textContent = clip.camera + " · " + fmtClipTime(clip.start) + " · " + num(clip.duration_s).toFixed(1) + " s · " + clipLabels(clip);
    for (const k of ["currentTime", "videoWidth", "videoHeight", "error"]) delete v.dataset[k];
    v.dataset.clip = clip.name;
    v.muted = muted;
    v.src = clipURL(clip.name);
    v.play().catch((e) => { v.dataset.error = String(e && e.message); });
    markPlaying();
  }

  // watchLive plays camera id's video as it comes: the socket's text messages name the type of
  // the init segment that follows ({"mime": ...}), its binary ones are the segments, appended to
  // a Media Source in order. A browser that cannot play the type says so in the player, and the
  // card's snapshots go on as before.
  function watchLive(id) {
    stopPlayer();
    const v = player.video;
    live.camera = id;
    player.root.hidden = false;
    player.title.textContent = "Live";
    player.info.textContent = id + " · connecting…";
    for (const k of ["currentTime", "videoWidth", "videoHeight", "error", "clip"]) delete v.dataset[k];
    v.dataset.live = id;
    v.muted = true; // browsers start only muted video by themselves
    const base = location.href.replace(/[?#].*$/, "").replace(/[^/]*$/, "");
    const ws = new WebSocket(base.replace(/^http/, "ws") + "api/cameras/" + encodeURIComponent(id) + "/live");
    ws.binaryType = "arraybuffer";
    live.ws = ws;
    ws.onmessage = (e) => {
      if (live.ws !== ws) return;
      if (typeof e.data === "string") {
        const m = JSON.parse(e.data);
        if (m.mime && m.mime !== live.mime) openSource(m.mime);
        live.start = Date.parse(m.start) || 0; // the capture time of media time 0
        return;
      }
      if (!live.source) return; // no type yet, or one this browser cannot play
      if (live.queue.length >= LIVE_QUEUE) { // the browser cannot keep up: start again at a keyframe
        watchLive(id);
        return;
      }
      live.queue.push(e.data);
      pump();
    };
    ws.onopen = () => { if (live.ws === ws) player.info.textContent = id + " · live"; };
    ed("edit-toggle").hidden = false;
    if (autoEdit) { // ?live=<camera>&edit=1 opens the editor too, once
      autoEdit = false;
      openEditor();
    }
    openFeed(id);
    ws.onclose = (e) => {
      if (live.ws !== ws) return;
      player.info.textContent = id + " · the live view ended" + (e.reason ? ": " + e.reason : "");
      v.dataset.liveClosed = String(e.code);
    };
  }

  // openSource starts a Media Source of type mime in the player: a new stream (a camera's new
  // session, or new parameters) starts a new one.
  function openSource(mime) {
    const v = player.video;
    live.mime = mime;
    live.queue = [];
    live.buffer = null;
    live.source = null;
    if (!window.MediaSource || !MediaSource.isTypeSupported(mime)) {
      v.dataset.error = "this browser cannot play " + mime + ": the card shows the analysed snapshots";
      player.info.textContent = live.camera + " · " + v.dataset.error;
      return;
    }
    delete v.dataset.error;
    const ms = new MediaSource();
    live.source = ms;
    ms.addEventListener("sourceopen", () => {
      if (live.source !== ms) return;
      live.buffer = ms.addSourceBuffer(mime);
      live.buffer.mode = "segments";
      live.buffer.addEventListener("updateend", pump);
      pump();
    }, { once: true });
    if (v.src) URL.revokeObjectURL(v.src);
    v.src = URL.createObjectURL(ms);
    armOverlay();
    v.play().catch(() => {}); // it starts once the first segments are in
  }

  // pump appends the next segment when the source buffer is free, drops what lies well behind
  // the play position, and keeps the video near the newest frame.
  function pump() {
    const sb = live.buffer, v = player.video;
    if (!sb || sb.updating) return;
    if (sb.buffered.length > 0) {
      const start = sb.buffered.start(0), end = sb.buffered.end(sb.buffered.length - 1);
      if (end - v.currentTime > LIVE_BEHIND_S) v.currentTime = Math.max(start, end - 0.3);
      if (v.currentTime - start > 2 * LIVE_KEEP_S) {
        sb.remove(start, v.currentTime - LIVE_KEEP_S);
        return; // updateend comes back here
      }
    }
    const seg = live.queue.shift();
    if (seg === undefined) return;
    try {
      sb.appendBuffer(seg);
    } catch (e) {
      v.dataset.error = "append: " + (e && e.message);
    }
    if (v.paused) v.play().catch(() => {});
  }

  // stopPlayer ends what the player plays: a clip, or a live view (its socket closed).
  function stopPlayer() {
    const v = player.video;
    closeEditor();
    ed("edit-toggle").hidden = true;
    if (live.ws) live.ws.close(1000, "closed by the page");
    live.ws = null;
    if (live.feed) live.feed.close(1000, "closed by the page");
    live.feed = null;
    live.scene = null;
    live.frames = [];
    live.drawn = 0;
    clearOverlay();
    live.source = null;
    live.buffer = null;
    live.queue = [];
    live.mime = "";
    live.camera = "";
    delete v.dataset.live;
    delete v.dataset.liveClosed;
    v.pause();
    if (v.src && v.src.startsWith("blob:")) URL.revokeObjectURL(v.src);
    v.removeAttribute("src");
    v.load();
    player.name = "";
    player.title.textContent = "Clip";
  }

  // openFeed subscribes to camera id's results (api/cameras/<id>/results, a WebSocket): the
  // scene (zones, lines, masks), then a message a frame analysed, kept by capture time.
  function openFeed(id) {
    const base = location.href.replace(/[?#].*$/, "").replace(/[^/]*$/, "");
    const ws = new WebSocket(base.replace(/^http/, "ws") + "api/cameras/" + encodeURIComponent(id) + "/results");
    live.feed = ws;
    ws.onmessage = (e) => {
      if (live.feed !== ws) return;
      const m = JSON.parse(e.data);
      if (m.scene) {
        live.scene = m.scene;
        return;
      }
      m.at = Date.parse(m.event.captured_at);
      live.frames.push(m);
      if (live.frames.length > OVERLAY_KEEP) live.frames.splice(0, live.frames.length - OVERLAY_KEEP);
    };
  }

  // resultFor is the analysed frame to draw over the frame captured at t: the latest captured
  // at or before it, if not older than OVERLAY_MAX_AGE_MS.
  function resultFor(t) {
    for (let i = live.frames.length - 1; i >= 0; i--) {
      const f = live.frames[i];
      if (f.at <= t + 1) return t - f.at <= OVERLAY_MAX_AGE_MS ? f : null;
    }
    return null;
  }

  function clearOverlay() {
    const ctx = overlay.getContext("2d");
    ctx.clearRect(0, 0, overlay.width, overlay.height);
  }

  // drawOverlay draws, over the frame on screen (media time mediaTime), the scene and the
  // boxes of its result, within the video's picture (letterboxed in the element).
  function drawOverlay(mediaTime) {
    const v = player.video;
    const w = overlay.clientWidth, h = overlay.clientHeight;
    if (overlay.width !== w || overlay.height !== h) { overlay.width = w; overlay.height = h; }
    const ctx = overlay.getContext("2d");
    ctx.clearRect(0, 0, w, h);
    if (!live.camera || !v.videoWidth || !live.start) return;
    const s = Math.min(w / v.videoWidth, h / v.videoHeight);
    const pw = v.videoWidth * s, ph = v.videoHeight * s, ox = (w - pw) / 2, oy = (h - ph) / 2;
    const X = (x) => ox + x * pw, Y = (y) => oy + y * ph;
    const captured = live.start + mediaTime * 1000;
    const f = resultFor(captured);
    editor.mediaTime = mediaTime;
    if (editor.on && editor.draft) {
      drawDraft(ctx, X, Y);
      return;
    }
    const scene = live.scene || { zones: [], lines: [], masks: [] };
    const occ = new Map((f ? f.zones : []).map((z) => [z.id, z.occupancy]));
    const cnt = new Map((f ? f.lines : []).map((l) => [l.id, l]));
    ctx.lineWidth = 2;
    ctx.font = "13px sans-serif";
    for (const z of scene.zones) {
      ctx.beginPath();
      z.points.forEach(([x, y], i) => (i ? ctx.lineTo(X(x), Y(y)) : ctx.moveTo(X(x), Y(y))));
      ctx.closePath();
      ctx.fillStyle = "rgba(255, 200, 0, 0.12)";
      ctx.fill();
      ctx.strokeStyle = "rgb(255, 200, 0)";
      ctx.stroke();
      ctx.fillStyle = "rgb(255, 200, 0)";
      ctx.fillText(z.id + (occ.has(z.id) ? " · " + occ.get(z.id) + " inside" : ""), X(z.points[0][0]) + 4, Y(z.points[0][1]) + 15);
    }
    for (const l of scene.lines) {
      const [[x1, y1], [x2, y2]] = l.points;
      ctx.strokeStyle = "rgb(0, 220, 255)";
      ctx.beginPath();
      ctx.moveTo(X(x1), Y(y1));
      ctx.lineTo(X(x2), Y(y2));
      ctx.stroke();
      const c = cnt.get(l.id);
      ctx.fillStyle = "rgb(0, 220, 255)";
      ctx.fillText(l.id + (c ? " · in " + c.in + " · out " + c.out : ""), (X(x1) + X(x2)) / 2 + 4, (Y(y1) + Y(y2)) / 2);
    }
    if (!f) return;
    let boxes = 0;
    for (const d of f.event.detections || []) {
      const b = d.box_norm;
      ctx.strokeStyle = d.track_id ? "rgb(255, 64, 64)" : "rgb(160, 160, 160)";
      ctx.strokeRect(X(b.x), Y(b.y), b.w * pw, b.h * ph);
      ctx.fillStyle = ctx.strokeStyle;
      ctx.fillText(d.label + (d.track_id ? " #" + d.track_id : "") + " " + num(d.score).toFixed(2), X(b.x), Y(b.y) - 3);
      boxes++;
    }
    if (f !== live.lastDrawn) { // a result put on screen: how long after its capture
      live.lastDrawn = f;
      live.drawn++;
      const lat = Date.now() - f.at;
      live.latency = live.drawn === 1 ? lat : 0.9 * live.latency + 0.1 * lat;
      v.dataset.overlayFrames = String(live.drawn);
      v.dataset.overlayBoxes = String(boxes);
      v.dataset.overlayLatencyMs = live.latency.toFixed(0);
      player.info.textContent = live.camera + " · live · boxes on screen " + live.latency.toFixed(0) + " ms after capture";
      if (boxes > 0) { // what a test of the page checks: the first box's top edge is drawn there
        const b = f.event.detections[0].box_norm;
        const px = ctx.getImageData(Math.round(X(b.x + b.w / 2)), Math.round(Y(b.y)), 1, 1).data;
        v.dataset.overlayFirstBox = [X(b.x), Y(b.y), b.w * pw, b.h * ph].map((n) => n.toFixed(0)).join(",");
        v.dataset.overlayFirstBoxAlpha = String(px[3]);
      }
    }
  }

  // Each frame the video presents: the overlay of its capture time (armed anew with each
  // Media Source).
  function onVideoFrame(now, meta) {
    live.rvfc = player.video.requestVideoFrameCallback(onVideoFrame);
    drawOverlay(meta.mediaTime);
  }
  function armOverlay() {
    const v = player.video;
    if (!("requestVideoFrameCallback" in v)) return; // no overlay in such a browser
    if (live.rvfc) v.cancelVideoFrameCallback(live.rvfc);
    live.rvfc = v.requestVideoFrameCallback(onVideoFrame);
  }

  // The picture's place in the overlay: the video letterboxed into the element.
  function pictureBox() {
    const v = player.video, w = overlay.clientWidth, h = overlay.clientHeight;
    if (!v.videoWidth) return null;
    const s = Math.min(w / v.videoWidth, h / v.videoHeight);
    const pw = v.videoWidth * s, ph = v.videoHeight * s;
    return { ox: (w - pw) / 2, oy: (h - ph) / 2, pw, ph };
  }

  async function openEditor() {
    const id = live.camera;
    if (!id) return;
    editor.on = true;
    editor.camera = id;
    ed("editor").hidden = false;
    overlay.classList.add("editing");
    overlay.removeAttribute("aria-hidden");
    ed("edit-toggle").textContent = "close the editor";
    await loadScene();
  }

  function closeEditor() {
    editor.on = false;
    editor.draft = null;
    editor.drawing = null;
    editor.selected = null;
    clearTimeout(editor.checkTimer);
    ed("editor").hidden = true;
    overlay.classList.remove("editing");
    overlay.setAttribute("aria-hidden", "true");
    ed("edit-toggle").textContent = "edit zones and lines";
  }

  // loadScene reads the camera's scene from the config file, with its version.
  async function loadScene() {
    const r = await fetch("api/cameras/" + encodeURIComponent(editor.camera) + "/scene", { cache: "no-store" });
    const m = await r.json().catch(() => ({}));
    if (!r.ok) {
      setStatus("cannot read the scene: " + (m.error || r.status));
      return;
    }
    editor.version = m.version;
    editor.editable = !!m.editable;
    editor.why = m.why_not || "";
    editor.draft = { zones: m.scene.zones || [], lines: m.scene.lines || [], masks: m.scene.masks || [] };
    editor.drawing = null;
    editor.selected = null;
    ed("edit-yaml").textContent = m.yaml;
    ed("edit-problems").replaceChildren();
    setStatus(editor.editable ? "" : "saving is off: " + editor.why);
    ed("editor").dataset.version = editor.version;
    renderShapes();
    redraw();
    updateButtons(true);
  }

  function setStatus(text) {
    ed("edit-status").textContent = text;
    ed("editor").dataset.status = text;
  }

  function updateButtons(ok) {
    ed("edit-finish").disabled = !editor.drawing || editor.drawing.kind === "lines";
    ed("edit-delete").disabled = !editor.selected;
    ed("edit-save").disabled = !(editor.editable && ok && !editor.drawing);
    ed("edit-save").title = editor.editable ? "" : editor.why;
  }

  function renderShapes() {
    const items = [];
    for (const kind of ["zones", "lines", "masks"]) {
      editor.draft[kind].forEach((sh, i) => {
        const b = el("button", null, (kind === "masks" ? "mask " + (i + 1) : sh.id) + " (" + kind.slice(0, -1) + ")");
        b.type = "button";
        b.dataset.kind = kind;
        b.dataset.index = String(i);
        if (editor.selected && editor.selected.kind === kind && editor.selected.index === i) b.dataset.selected = "";
        b.addEventListener("click", () => {
          editor.selected = { kind, index: i };
          ed("edit-kind").value = kind;
          ed("edit-id").value = sh.id || "";
          ed("edit-classes").value = (sh.classes || []).join(", ");
          renderShapes();
          updateButtons(true);
          redraw();
        });
        const li = el("li");
        li.append(b);
        items.push(li);
      });
    }
    ed("edit-shapes").replaceChildren(...items);
  }

  // startShape begins drawing: the selected shape again (its points cleared), else a new one
  // of the chosen kind.
  function startShape() {
    const kind = ed("edit-kind").value;
    const sel = editor.selected && editor.selected.kind === kind ? editor.selected.index : -1;
    editor.drawing = { kind, index: sel, points: [] };
    setStatus(kind === "lines" ? "click the line's two ends" : "click the outline's points, then finish");
    updateButtons(false);
    redraw();
  }

  // finishShape puts the shape drawn into the draft and checks the draft.
  function finishShape() {
    const d = editor.drawing;
    if (!d) return;
    const need = d.kind === "lines" ? 2 : 3;
    if (d.points.length < need) {
      setStatus("a " + d.kind.slice(0, -1) + " needs " + (d.kind === "lines" ? "two" : "at least three") + " points");
      return;
    }
    const sh = { points: d.points };
    if (d.kind !== "masks") {
      sh.id = ed("edit-id").value.trim();
      const cl = ed("edit-classes").value.split(",").map((c) => c.trim()).filter((c) => c);
      sh.classes = cl;
    }
    const list = editor.draft[d.kind];
    let index = d.index;
    if (index >= 0) list[index] = sh;
    else { list.push(sh); index = list.length - 1; }
    editor.drawing = null;
    editor.selected = { kind: d.kind, index };
    setStatus("");
    renderShapes();
    redraw();
    checkDraft();
  }

  function deleteShape() {
    if (!editor.selected) return;
    editor.draft[editor.selected.kind].splice(editor.selected.index, 1);
    editor.selected = null;
    renderShapes();
    redraw();
    checkDraft();
  }

  // checkDraft asks the daemon what check says of the file with the draft in it.
  async function checkDraft() {
    updateButtons(false);
    const r = await fetch("api/cameras/" + encodeURIComponent(editor.camera) + "/scene/check", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(editor.draft),
    });
    const m = await r.json().catch(() => ({}));
    showReply(m, r.status);
    updateButtons(r.ok && m.ok);
  }

  function showReply(m, status) {
    if (m.yaml) ed("edit-yaml").textContent = m.yaml;
    const problems = (m.problems || []).concat(m.error ? [m.error] : []);
    ed("edit-problems").replaceChildren(...problems.map((p) => el("li", null, p)));
    ed("editor").dataset.checked = String(status);
  }

  async function saveDraft() {
    const r = await fetch("api/cameras/" + encodeURIComponent(editor.camera) + "/scene", {
      method: "PUT", headers: { "Content-Type": "application/json", "If-Match": '"' + editor.version + '"' }, body: JSON.stringify(editor.draft),
    });
    const m = await r.json().catch(() => ({}));
    showReply(m, r.status);
    if (r.ok && m.saved) {
      editor.version = m.version;
      ed("editor").dataset.version = m.version;
      ed("editor").dataset.saved = m.version;
      setStatus("saved; the daemon reloads the file");
    } else if (r.status === 412) {
      setStatus("the config file changed meanwhile: read again, redo the edit");
      await loadScene();
    } else {
      setStatus("not saved (" + r.status + ")");
    }
    updateButtons(r.ok);
  }

  // A click on the picture while drawing adds a point (fractions of the frame, 3 decimals).
  overlay.addEventListener("click", (e) => {
    if (!editor.on || !editor.drawing) return;
    const b = pictureBox();
    if (!b) return;
    const r = overlay.getBoundingClientRect();
    const x = (e.clientX - r.left - b.ox) / b.pw, y = (e.clientY - r.top - b.oy) / b.ph;
    if (x < 0 || x > 1 || y < 0 || y > 1) return;
    editor.drawing.points.push([Math.round(x * 1000) / 1000, Math.round(y * 1000) / 1000]);
    if (editor.drawing.kind === "lines" && editor.drawing.points.length === 2) finishShape();
    else redraw();
  });

  function redraw() { drawOverlay(editor.mediaTime); }

  // drawDraft draws the editor's draft: zones yellow, lines cyan with their "in" arrow, masks
  // grey, the selected shape magenta, the shape being drawn dashed with its points.
  function drawDraft(ctx, X, Y) {
    const sel = (kind, i) => editor.selected && editor.selected.kind === kind && editor.selected.index === i;
    const path = (pts, close) => {
      ctx.beginPath();
      pts.forEach(([x, y], i) => (i ? ctx.lineTo(X(x), Y(y)) : ctx.moveTo(X(x), Y(y))));
      if (close) ctx.closePath();
    };
    ctx.lineWidth = 2;
    ctx.font = "13px sans-serif";
    editor.draft.masks.forEach((m, i) => {
      path(m.points, true);
      ctx.fillStyle = "rgba(40, 40, 40, 0.45)";
      ctx.fill();
      ctx.strokeStyle = sel("masks", i) ? "rgb(255, 64, 255)" : "rgb(200, 200, 200)";
      ctx.stroke();
    });
    editor.draft.zones.forEach((z, i) => {
      path(z.points, true);
      ctx.fillStyle = "rgba(255, 200, 0, 0.15)";
      ctx.fill();
      ctx.strokeStyle = sel("zones", i) ? "rgb(255, 64, 255)" : "rgb(255, 200, 0)";
      ctx.stroke();
      ctx.fillStyle = ctx.strokeStyle;
      ctx.fillText(z.id, X(z.points[0][0]) + 4, Y(z.points[0][1]) + 15);
    });
    editor.draft.lines.forEach((l, i) => {
      const [[x1, y1], [x2, y2]] = l.points;
      ctx.strokeStyle = sel("lines", i) ? "rgb(255, 64, 255)" : "rgb(0, 220, 255)";
      path(l.points, false);
      ctx.stroke();
      // "in" is from the line's right-hand side to its left (analytics/lines.go): the arrow
      // points to the left of the way from its first point to its second.
      const mx = (X(x1) + X(x2)) / 2, my = (Y(y1) + Y(y2)) / 2;
      const dx = X(x2) - X(x1), dy = Y(y2) - Y(y1), len = Math.hypot(dx, dy) || 1;
      const ax = (dy / len) * 24, ay = (-dx / len) * 24;
      ctx.beginPath();
      ctx.moveTo(mx - ax, my - ay);
      ctx.lineTo(mx + ax, my + ay);
      ctx.lineTo(mx + ax * 0.6 - ay * 0.3, my + ay * 0.6 + ax * 0.3);
      ctx.moveTo(mx + ax, my + ay);
      ctx.lineTo(mx + ax * 0.6 + ay * 0.3, my + ay * 0.6 - ax * 0.3);
      ctx.stroke();
      ctx.fillStyle = ctx.strokeStyle;
      ctx.fillText(l.id + " · in", mx + ax + 4, my + ay);
    });
    const d = editor.drawing;
    if (d && d.points.length) {
      ctx.setLineDash([6, 4]);
      ctx.strokeStyle = "rgb(255, 64, 255)";
      path(d.points, d.kind !== "lines" && d.points.length > 2);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = "rgb(255, 64, 255)";
      for (const [x, y] of d.points) ctx.fillRect(X(x) - 3, Y(y) - 3, 6, 6);
    }
    overlay.dataset.draftShapes = String(editor.draft.zones.length + editor.draft.lines.length + editor.draft.masks.length);
  }

  ed("edit-toggle").addEventListener("click", () => (editor.on ? closeEditor() : openEditor()));
  ed("edit-new").addEventListener("click", startShape);
  ed("edit-finish").addEventListener("click", finishShape);
  ed("edit-delete").addEventListener("click", deleteShape);
  ed("edit-save").addEventListener("click", saveDraft);

  function markPlaying() {
    for (const b of document.querySelectorAll("button.clip")) b.toggleAttribute("data-playing", b.dataset.clip === player.name);
  }

  // The video's size and progress, as data- attributes too (what a test of the page reads).
  player.video.addEventListener("loadedmetadata", () => {
    player.video.dataset.videoWidth = String(player.video.videoWidth);
    player.video.dataset.videoHeight = String(player.video.videoHeight);
  });
  player.video.addEventListener("timeupdate", () => {
    player.video.dataset.currentTime = player.video.currentTime.toFixed(2);
  });
  player.video.addEventListener("error", () => {
    const err = player.video.error;
    if (err) player.video.dataset.error = "media error " + err.code + (err.message ? ": " + err.message : "");
  });
  document.getElementById("player-close").addEventListener("click", () => {
    stopPlayer();
    player.root.hidden = true;
    markPlaying();
  });

  // refreshSnapshot loads the camera's snapshot off-screen when new frames were analysed
  // since the shown one, and swaps it in once it has loaded with a picture; a failed load
  // (503: nothing analysed yet, 404: camera just removed) shows the placeholder.
  function refreshSnapshot(card, cam) {
    const analysed = num(cam.frames_analysed);
    if (card.loading || (card.shown >= 0 && analysed === card.shown)) return;
    card.loading = true;
    if (card.root.dataset.snapshot !== "loaded") card.root.dataset.snapshot = "loading";
    const img = new Image();
    img.alt = card.img.alt;
    img.onload = () => {
      card.loading = false;
      if (img.naturalWidth > 0) {
        card.img.replaceWith(img);
        card.img = img;
        card.shown = analysed;
        card.root.dataset.snapshot = "loaded";
        card.root.dataset.snapshotWidth = String(img.naturalWidth);
      } else {
        missing(card);
      }
    };
    img.onerror = () => {
      card.loading = false;
      missing(card);
    };
    img.src = "api/cameras/" + encodeURIComponent(card.id) + "/snapshot.jpg?t=" + Date.now();
  }

  function missing(card) {
    card.shown = -1;
    card.root.dataset.snapshot = "missing";
    delete card.root.dataset.snapshotWidth;
  }

  function updateCard(card, cam) {
    const st = cam.state || "unknown";
    card.root.dataset.state = st;
    card.state.dataset.state = st;
    card.state.textContent = st;
    const warnings = st === "online" ? cam.warnings || [] : [];
    card.reason.textContent = st === "online" ? warnings.join(" ") : cam.last_error || "";
    card.reason.toggleAttribute("data-warn", warnings.length > 0);
    card.root.dataset.fps = String(num(cam.fps_achieved));
    const d = card.dd;
    d.fps.textContent = num(cam.fps_achieved).toFixed(1) + " / " + num(cam.fps);
    const none = num(cam.frames_analysed) === 0; // no latency measured yet
    d.latency.textContent = none ? "–" : fmtMS(cam.latency_ms);
    d.infer.textContent = none ? "–" : fmtMS(cam.inference_ms);
    d.age.textContent = none ? "–" : fmtMS(cam.frame_age_ms).replace(" ms", "") + " / " + fmtMS(cam.frame_age_max_ms);
    d.analysed.textContent = num(cam.frames_analysed);
    d.detections.textContent = num(cam.detections);
    const drops = cam.frames_dropped || {};
    const problems = ["stale", "source", "worker_lost", "timeout", "rejected", "shutdown"];
    const lost = problems.reduce((n, k) => n + num(drops[k]), 0);
    d.dropped.textContent = lost;
    d.dropped.title = problems.map((k) => k + " " + num(drops[k])).join(", ");
    d.dropped.toggleAttribute("data-warn", lost > 0);
    d.superseded.textContent = num(drops.superseded);
    d.reconnects.textContent = num(cam.reconnects);
    card.url.textContent = (cam.url || "") + " · last frame " + fmtTime(cam.last_analysed);
    refreshSnapshot(card, cam);
    refreshClips(card);
  }

  function renderCameras(cams) {
    const seen = new Set();
    let prev = null;
    for (const cam of cams) {
      seen.add(cam.id);
      let card = cards.get(cam.id);
      if (!card) {
        card = newCard(cam.id);
        cards.set(cam.id, card);
        onScreen.observe(card.root);
      }
      // Keep the daemon's order; moving a card keeps its image.
      const want = prev ? prev.nextSibling : grid.firstChild;
      if (want !== card.root) grid.insertBefore(card.root, want);
      prev = card.root;
      updateCard(card, cam);
    }
    for (const [id, card] of cards) {
      if (!seen.has(id)) {
        onScreen.unobserve(card.root);
        card.root.remove();
        cards.delete(id);
      }
    }
    noCameras.hidden = cams.length > 0;
    const online = cams.filter((c) => c.state === "online").length;
    return cams.length + (cams.length === 1 ? " camera" : " cameras") + ", " + online + " online";
  }

  function renderWorkers(workers) {
    const rows = workers.map((w, i) => {
      const tr = el("tr");
      tr.dataset.worker = String(i);
      const cells = [
        [i], [w.pid || "–"], [w.state, "state"], [w.provider], [num(w.in_flight), "num"], [num(w.jobs), "num"],
        [num(w.lost), "num"], [num(w.restarts), "num"], [num(w.recycles), "num"],
        [fmtBytes(w.rss_bytes), "num"], [fmtBytes(w.gpu_bytes), "num"],
      ];
      for (const [v, cls] of cells) {
        const td = el("td", cls === "num" ? "num" : null, String(v));
        if (cls === "state") td.dataset.state = w.state;
        tr.append(td);
      }
      return tr;
    });
    workersBody.replaceChildren(...rows);
    return workers.length + (workers.length === 1 ? " worker" : " workers");
  }

  // The daemon's memory by owner (they add up to its resident memory), its workers', the
  // total and the budget that bounds it.
  function renderMemory(m) {
    const workers = (m.workers || []).reduce((s, w) => s + num(w.resident_bytes), 0);
    const total = num(m.resident_bytes) + workers;
    const owners = [
      ["go", "Go runtime (daemon, NATS server, RTSP)", m.go_bytes],
      ["nats_store_caches", "NATS store caches", m.nats_store_caches_bytes], ["frame_buffers", "frame buffers", m.frame_buffers_bytes],
      ["snapshot_buffers", "snapshot buffers", m.snapshot_buffers_bytes], ["clip_rings", "clip rings", m.clip_rings_bytes],
      ["c_heap", "C heap (decoders)", m.c_heap_bytes], ["gpu_driver", "GPU driver (pinned, decoders)", m.gpu_driver_bytes],
      ["code", "code", m.code_bytes], ["shared", "shared (frame slots)", m.shared_bytes],
      ["workers", (m.workers || []).length + " worker processes", workers], ["total", "total", total],
    ];
    memoryBody.replaceChildren(...owners.map(([id, name, bytes]) => {
      const tr = el("tr");
      tr.dataset.owner = id;
      tr.append(el("td", null, name), el("td", "num", fmtBytes(bytes)));
      return tr;
    }));
    const budget = num(m.budget_bytes);
    memoryBudget.dataset.over = String(budget > 0 && total > budget);
    memoryBudget.textContent = budget > 0
      ? "budget " + fmtBytes(budget) + " from " + m.budget_from + " · Go limit " + fmtBytes(m.go_limit_bytes) +
        " · " + num(m.over_budget_samples) + " samples over"
      : "no budget: memory_limit_mib is 0 and the cgroup sets no limit";
  }

  async function poll() {
    try {
      const [cams, workers, memory] = await Promise.all([getJSON("api/cameras"), getJSON("api/workers"), getJSON("api/memory")]);
      const a = renderCameras(cams || []);
      const b = renderWorkers(workers || []);
      renderMemory(memory || {});
      summary.textContent = a + " · " + b;
      conn.dataset.conn = "live";
      conn.textContent = "live · " + new Date().toLocaleTimeString();
    } catch (e) {
      conn.dataset.conn = "lost";
      conn.textContent = "no answer from visiond (" + e.message + "); retrying";
    }
    setTimeout(poll, POLL_MS);
  }

  document.title = "visiond · " + location.host;
  if (params.get("live")) watchLive(params.get("live"));
  poll();
})();
