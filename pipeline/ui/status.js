// visiond status page: polls api/cameras and api/workers every second and keeps one card per
// camera (added and removed as the daemon's cameras change) and a row per worker. Plain DOM,
// no external resources; text from the daemon is only ever set as text.
"use strict";

(() => {
  const POLL_MS = 1000;
  const grid = document.getElementById("cameras");
  const noCameras = document.getElementById("no-cameras");
  const workersBody = document.querySelector("#workers tbody");
  const conn = document.getElementById("conn");
  const summary = document.getElementById("summary");
  const cards = new Map(); // camera id -> card

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
    const url = el("footer", "url");
    root.append(head, shot, reason, stats, url);
    return {
      id, root, state, img, placeholder, reason, dd, url,
      loading: false, // a snapshot request is in flight
      shown: -1, // frames_analysed when the shown snapshot was requested; -1: none shown
    };
  }

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
    card.reason.textContent = st === "online" ? "" : cam.last_error || "";
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
      }
      // Keep the daemon's order; moving a card keeps its image.
      const want = prev ? prev.nextSibling : grid.firstChild;
      if (want !== card.root) grid.insertBefore(card.root, want);
      prev = card.root;
      updateCard(card, cam);
    }
    for (const [id, card] of cards) {
      if (!seen.has(id)) {
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

  async function poll() {
    try {
      const [cams, workers] = await Promise.all([getJSON("api/cameras"), getJSON("api/workers")]);
      const a = renderCameras(cams || []);
      const b = renderWorkers(workers || []);
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
  poll();
})();
