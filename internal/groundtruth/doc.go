// Package groundtruth makes test videos whose truth the test knows: real people, cut out of
// the sample video, walking along given paths over its empty plaza, written as an H.264
// MPEG-TS file that the daemon's cameras play, with where every person is on every frame,
// which lines they cross in which direction and which zones they stay in for how long. The
// end-to-end tests of tracking, zones and lines (issue 14) compare the daemon's events with
// it. It is imported by tests only.
//
// It is pure Go (no cgo): video goes in and out through the ffmpeg and ffprobe programs
// that scripts/setup.sh installs, so any package's tests can import it.
//
// # Making a video
//
//	m, err := groundtruth.LoadVTest(ctx, testutil.Media(t, "vtest.avi")) // ~2 s; reuse m
//	s, err := groundtruth.Plaza(m, 10)       // or a Scenario of your own (below)
//	sc, err := groundtruth.NewScene(s)
//	file := filepath.Join(t.TempDir(), "plaza.ts")
//	frames, err := sc.WriteTS(ctx, file)     // ~2 s for Plaza's 12 s; the truth of every frame
//
// LoadVTest returns Media: vtest.avi's plaza with nobody on it (the per-pixel median of
// frames across the video; its parked cars and van stay, as on the live sample camera) and
// twenty people cut out of its frames by their difference from that background. Each person
// was chosen, and is checked by this package's tests, to be found by yolov8n with IoU >= 0.7
// when drawn alone on the plaza (one miss in twenty placements allowed: a far person in a
// pale jacket before the lamp post is not found). (The model also sees, at score 0.26, a "person"
// in the small blue sign at the left edge on a few frames: a static false positive.)
//
// A Scenario is a frame size, a frame rate, a duration, a background and Objects: each a
// Sprite (its Class is the object's class), a Scale, and a Path of timed Waypoints giving
// the object's anchor in normalized coordinates; between waypoints it moves in a straight
// line at constant speed, before the first and after the last it is not on the video.
// Nearer objects (anchor lower on the picture) are drawn over farther ones. Optional
// uniform per-pixel Noise is seeded, so every video is the same each time.
//
// Plaza is a ready-made 12 s scenario at any frame rate with four people, PlazaLine (a
// vertical line through the middle, drawn top to bottom) and PlazaZone (a rectangle on the
// grass, lower left): two In crossings, two Out, one stay in the zone, a stop, a partial
// occlusion and a near miss of the line. Its documentation lists them.
//
// Crowd is a harder scene, seeded and the same for the same parameters (CrowdParams; its
// zero value is DefaultCrowd), varied from seed to seed so that it cannot be memorized
// (issue 37: seeds 0-9 tune, 100-129 are held out): 60 s of 28 people drawn by perspective
// (VTestPerspective, fitted on vtest.avi's own people: a person's size follows the depth of
// their feet), every cut-out of the media mirrored to face its way, entering and leaving at
// every edge (the sides, the bottom, the far side along the top road), walking across, up
// and down the picture (crossing CrowdLine at shallow angles too), changing speed, pausing,
// some standing 2 to 6 s, three groups of two or three side by side; six planned
// occlusions of about a second (CrowdScene.Occlusions) behind a person standing still,
// a pillar or a van passing the other way; pillars and signs (Scenario.Props: they hide
// what passes behind them and are no objects of the truth); four vans, one of them parking
// 10 to 20 s; the light drifting and stepping (Scenario.Light) and per-pixel noise. No one
// is wholly hidden inside the frame for more than 2 s (Crowd draws such walks again).
// The vans are the van parked in the background cut out of it (Media.Vehicles, class car;
// the model sees it as a car, now and then a truck). TestCrowdSeeds logs each seed's
// figures: crossings, visits, and the fraction of object-frames less than half visible and
// wholly hidden. VTestParked are the parked vehicles that the model sees on every frame and
// no truth holds.
//
// # Playing it to the daemon
//
// WriteTS writes what scripts/setup.sh makes of vtest.avi for the sample camera: H.264
// (libx264, yuv420p, one keyframe a second, no B-frames, CRF 23) in MPEG-TS, at the
// scenario's frame rate. Two ways to play it:
//
//   - the sample RTSP camera: samplecam.Server{Streams: map[string]string{"plaza": file}}
//     and a camera of kind rtsp at its URL("plaza"). The stream is live and looped: which
//     frame comes first depends on when the session joins.
//   - a camera of kind file (`kind: file`, `file: <path>`): OpenCV plays the file from its
//     first frame, at its rate, looped, every frame decoded, so the camera's frame Seq is the
//     video's frame (Seq-1) mod Frames() as long as its session does not restart (a restart
//     plays from the start again; Status().Reconnects says): Scene.TruthOfSeq(seq) is its
//     truth. Prefer it where a test needs the truth of each frame (identity switches,
//     matching); make the video at the analysed rate (Plaza(m, 2)) to have every frame
//     analysed, or at 10 fps and analyse fewer.
//
// Times in the truth are from the start of the video; on a looped camera, the n-th loop
// adds n*Duration.
//
// # The truth
//
//   - per frame: WriteTS's result, Scene.Truth(i), Scene.TruthOfSeq(seq), or Scene.At(t)
//     at any time. Each Truth has the object's id, class, box in pixels (the sprite's tight
//     box, clipped to the frame; compare it with the detector's boxes, e.g. with IoU),
//     anchor and Visible, the fraction of its pixels that show (less than 1 when partly
//     outside the frame or behind another object).
//   - lines: Scenario.Crossings(line) and Count. A Line goes from P1 to P2; standing on P1
//     and looking at P2, an anchor crossing from the right-hand side to the left-hand side
//     (as seen on the picture, y downwards) goes In, the other way Out. For a line drawn top
//     to bottom, walking left to right is In; for one drawn left to right, walking up the
//     picture is In. The analytics package uses the same rule.
//   - zones: Scenario.Visits(zone): entries, exits and dwell per object. A point on the
//     zone's boundary is inside.
//
// Lines and zones are judged on the continuous paths of the anchor (the bottom-centre of
// the box, the daemon's default anchor), not on frames, and with no debounce: an analysed
// frame rate that skips past a short stay, or a min_seconds debounce, is the daemon's
// business, and the test's tolerance. Keep scenario paths clear of the ends of lines and the
// corners of zones, and lines and zones clear of the frame's edges, where the drawn box is
// clipped but the truth's anchor is not.
//
// # Scoring a tracker
//
// Scored as the field scores, with TrackEval's definitions (its code is the reference:
// TestTrackEvalReference compares every figure with TrackEval's own on a small sequence).
// Evaluator takes, frame by frame, the truth and the tracked boxes (Tracked: track id,
// class, box) and gives CLEAR (MOTA, MOTP, switches, fragmentations, mostly tracked: the
// Hungarian method on each frame, the previous frame's pairs first, TrackEval's switch
// rule), Identity (IDF1, IDP, IDR under the global one-to-one assignment of objects to
// tracks) and HOTA (DetA, AssA, and their recall and precision, over the 19 thresholds).
// The truth keeps an object while any part of it shows, as MOTChallenge does; the "at least
// half visible" truth is the variant (MinVisible), never the headline. Objects showing less
// and the Ignore boxes are distractors: a box matched to one is removed with it.
//
// ScoreRun scores a whole run of the analytics over a scene's video, given as Observed
// (analysed frames with their tracked boxes, line crossings, zone stays, in the video's
// time: the daemon's events with no dependency on its packages): the tracking figures
// against both truths, the line's crossings one by one (ScoreCrossings: a report matches a
// true crossing of the same direction and class within max(1 s, the analysed interval), one
// to one; precision and recall, never netted) and the zone's dwell per visit (ScoreStays).
// pipeline's crowd tests are its users.
package groundtruth
