package groundtruth

import "time"

// Summary is a run's Figures flattened for a report: what the crowd benchmark writes per
// seed and rate (pipeline's TestCrowdReplay, VISIOND_CROWD_OUT) and cmd/visiond-bench reads.
type Summary struct {
	Seed     uint64  `json:"seed"`
	FPS      float64 `json:"fps"`
	Frames   int     `json:"frames"`    // analysed frames scored
	ElapsedS float64 `json:"elapsed_s"` // wall time of the run, where it was timed

	// Against every object showing (TrackEval's figures).
	HOTA float64 `json:"hota"`
	DetA float64 `json:"deta"`
	AssA float64 `json:"assa"`
	IDF1 float64 `json:"idf1"`
	IDP  float64 `json:"idp"`
	IDR  float64 `json:"idr"`
	MOTA float64 `json:"mota"`
	MOTP float64 `json:"motp"`
	TP   int     `json:"tp"`
	FN   int     `json:"fn"`
	FP   int     `json:"fp"`
	IDSW int     `json:"idsw"`
	Frag int     `json:"frag"`
	MT   int     `json:"mt"`
	PT   int     `json:"pt"`
	ML   int     `json:"ml"`
	// Against the objects at least half visible.
	HalfHOTA float64 `json:"half_hota"`
	HalfIDF1 float64 `json:"half_idf1"`
	HalfMOTA float64 `json:"half_mota"`
	// What a perfect association of the same detections scores (every detection that
	// overlaps a true object by IoU 0.5 given that object's id, nothing else reported): the
	// most a tracker that reports only the detector's boxes could reach. Zero where not
	// worked out.
	CeilingHOTA float64 `json:"ceiling_hota,omitempty"`
	CeilingIDF1 float64 `json:"ceiling_idf1,omitempty"`

	Tracks    int `json:"tracks"`
	Objects   int `json:"objects"`
	Handovers int `json:"handovers"`

	CrossingsTrue     int     `json:"crossings_true"`
	CrossingsReported int     `json:"crossings_reported"`
	CrossingsMatched  int     `json:"crossings_matched"`
	CrossingPrecision float64 `json:"crossing_precision"`
	CrossingRecall    float64 `json:"crossing_recall"`

	Visits          int     `json:"visits"`
	Stays           int     `json:"stays"`
	VisitsFound     int     `json:"visits_found"`
	DwellTrueS      float64 `json:"dwell_true_s"`
	DwellReportedS  float64 `json:"dwell_reported_s"`
	DwellError      float64 `json:"dwell_error"`
	MeanDwellErrorS float64 `json:"mean_dwell_error_s"`
}

// Summary flattens the figures of a run of seed's scene at fps.
func (fig Figures) Summary(seed uint64, fps float64) Summary {
	t, h, c, z := fig.Tracking, fig.Half, fig.Crossings, fig.Zone
	return Summary{Seed: seed, FPS: fps, Frames: fig.Frames,
		HOTA: t.HOTA.HOTA, DetA: t.HOTA.DetA, AssA: t.HOTA.AssA, IDF1: t.ID.IDF1, IDP: t.ID.IDP, IDR: t.ID.IDR,
		MOTA: t.CLEAR.MOTA, MOTP: t.CLEAR.MOTP, TP: t.CLEAR.TP, FN: t.CLEAR.FN, FP: t.CLEAR.FP, IDSW: t.CLEAR.IDSW,
		Frag: t.CLEAR.Frag, MT: t.CLEAR.MT, PT: t.CLEAR.PT, ML: t.CLEAR.ML,
		HalfHOTA: h.HOTA.HOTA, HalfIDF1: h.ID.IDF1, HalfMOTA: h.CLEAR.MOTA,
		Tracks: fig.Tracks, Objects: fig.Objects, Handovers: fig.Handovers,
		CrossingsTrue: c.True, CrossingsReported: c.Reported, CrossingsMatched: c.Matched,
		CrossingPrecision: c.Precision, CrossingRecall: c.Recall,
		Visits: z.Visits, Stays: z.Stays, VisitsFound: z.Found, DwellTrueS: z.DwellTrue.Seconds(),
		DwellReportedS: z.DwellReported.Seconds(), DwellError: z.DwellError, MeanDwellErrorS: z.MeanDwellError.Seconds()}
}

// CrowdReport is the crowd benchmark's output (VISIOND_CROWD_OUT): the figures of every
// seed's scene at every rate, and which seeds the tracker was tuned on.
type CrowdReport struct {
	Params string        `json:"params"` // the scenes' parameters but the seed
	Tuning []uint64      `json:"tuning"` // the seeds the tracker is tuned on
	Scenes []CrowdTotals `json:"scenes"`
	Runs   []Summary     `json:"runs"`
}

// CrowdTotals are a crowd scene's truth in totals.
type CrowdTotals struct {
	Seed       uint64  `json:"seed"`
	Objects    int     `json:"objects"`
	People     int     `json:"people"`
	Vehicles   int     `json:"vehicles"`
	Crossings  int     `json:"crossings"`
	Visits     int     `json:"visits"`
	DwellS     float64 `json:"dwell_s"`
	Occlusions int     `json:"occlusions"`
	Standers   int     `json:"standers"`
	VideoS     float64 `json:"video_s"`
}

// Totals counts the scene's truth.
func (cs CrowdScene) Totals() (CrowdTotals, error) {
	cr, err := cs.Scenario.Crossings(cs.Line)
	if err != nil {
		return CrowdTotals{}, err
	}
	vs, err := cs.Scenario.Visits(cs.Zone)
	if err != nil {
		return CrowdTotals{}, err
	}
	var dwell time.Duration
	for _, v := range vs {
		dwell += v.Dwell()
	}
	return CrowdTotals{Seed: cs.Params.Seed, Objects: len(cs.Scenario.Objects), People: cs.Params.People, Vehicles: cs.Params.Vehicles,
		Crossings: len(cr), Visits: len(vs), DwellS: dwell.Seconds(), Occlusions: len(cs.Occlusions), Standers: len(cs.Standers),
		VideoS: cs.Scenario.Duration.Seconds()}, nil
}

// RecordingReport is the real recording's benchmark output (VISIOND_VTEST_OUT): a replay of
// it scored against its hand-made truth (RecordedTruth) at each analysed rate.
type RecordingReport struct {
	Video     string          `json:"video"`
	Crossings int             `json:"crossings"` // true crossings of all its lines
	Visits    int             `json:"visits"`    // true visits of all its zones
	Rates     []RecordingRate `json:"rates"`
}

// RecordingRate is the figures of one analysed rate.
type RecordingRate struct {
	FPS float64 `json:"fps"`
	// Lines are each line's crossings, and All of every line together.
	Lines []LineSummary `json:"lines"`
	All   LineSummary   `json:"all"`
	// Zones are each zone's dwell.
	Zones []ZoneSummary `json:"zones"`
}

// LineSummary is a line's CrossingScore in short.
type LineSummary struct {
	Line      string  `json:"line"`
	True      int     `json:"true"`
	Reported  int     `json:"reported"`
	Matched   int     `json:"matched"`
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
}

// Summary shortens cs for line.
func (cs CrossingScore) Summary(line string) LineSummary {
	return LineSummary{Line: line, True: cs.True, Reported: cs.Reported, Matched: cs.Matched, Precision: cs.Precision, Recall: cs.Recall}
}

// Add adds o's counts to s (precision and recall of the sums).
func (s LineSummary) Add(o LineSummary) LineSummary {
	s.True, s.Reported, s.Matched = s.True+o.True, s.Reported+o.Reported, s.Matched+o.Matched
	s.Precision, s.Recall = ratio(s.Matched, s.Reported), ratio(s.Matched, s.True)
	return s
}

// ZoneSummary is a zone's ZoneScore in short.
type ZoneSummary struct {
	Zone            string  `json:"zone"`
	Visits          int     `json:"visits"`
	Stays           int     `json:"stays"`
	Found           int     `json:"found"`
	DwellTrueS      float64 `json:"dwell_true_s"`
	DwellReportedS  float64 `json:"dwell_reported_s"`
	DwellError      float64 `json:"dwell_error"`
	MeanDwellErrorS float64 `json:"mean_dwell_error_s"`
}

// Summary shortens z for zone.
func (z ZoneScore) Summary(zone string) ZoneSummary {
	return ZoneSummary{Zone: zone, Visits: z.Visits, Stays: z.Stays, Found: z.Found, DwellTrueS: z.DwellTrue.Seconds(),
		DwellReportedS: z.DwellReported.Seconds(), DwellError: z.DwellError, MeanDwellErrorS: z.MeanDwellError.Seconds()}
}
