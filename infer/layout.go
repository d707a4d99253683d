package infer

import (
	"fmt"
	"strconv"
)

// Layout is the arrangement of a detector's single output tensor, told from its shape by
// DetectLayout.
type Layout int

const (
	// LayoutV8: YOLOv8/v9/v11, [1, 4+C, N]: per anchor cx, cy, w, h and C class scores,
	// anchor-minor (each row holds one value of all N anchors). Needs NMS.
	LayoutV8 Layout = iota + 1
	// LayoutV5: YOLOv5/v7, [1, N, 5+C]: per anchor (one row each) cx, cy, w, h,
	// objectness and C class scores; the score of a class is objectness * class score.
	// Needs NMS.
	LayoutV5
	// LayoutE2E: YOLOv10 and other end-to-end exports, [1, N, 6]: per row x1, y1, x2, y2,
	// score, class id, already de-duplicated by the model: no NMS.
	LayoutE2E
)

func (l Layout) String() string {
	switch l {
	case LayoutV8:
		return "yolov8 [1,4+C,N]"
	case LayoutV5:
		return "yolov5 [1,N,5+C]"
	case LayoutE2E:
		return "end-to-end [1,N,6]"
	}
	return "layout(" + strconv.Itoa(int(l)) + ")"
}

// DetectLayout tells the layout of an output from its shape and returns its class count
// (0 when the layout does not say: end-to-end) and its anchor (row) count N. The rules,
// on a static [1, A, B]:
//   - B == 6 and A >= 6: end-to-end [1,N,6]. A single-class YOLOv5 model ([1,N,6] too) is
//     read as end-to-end: it cannot be told apart by shape;
//   - A > B: [1,N,5+C] (YOLOv5/v7), which needs B > 5;
//   - A < B: [1,4+C,N] (YOLOv8/v9/v11), which needs A > 4;
//   - A == B, any other rank, a batch other than 1 or a dynamic dimension: unsupported.
//
// The anchor dimension is the larger: N is thousands (8400 at 640x640), C tens. The
// workers (infer/worker) decode by these rules and `visiond model inspect` reports them.
func DetectLayout(shape []int64) (l Layout, classes, anchors int, err error) {
	if len(shape) != 3 || shape[0] != 1 {
		return 0, 0, 0, fmt.Errorf("shape %v is not [1,A,B]", shape)
	}
	a, b := shape[1], shape[2]
	switch {
	case a <= 0 || b <= 0:
		return 0, 0, 0, fmt.Errorf("shape %v is not static", shape)
	case b == 6 && a >= 6:
		return LayoutE2E, 0, int(a), nil
	case a > b && b > 5:
		return LayoutV5, int(b - 5), int(a), nil
	case a < b && a > 4:
		return LayoutV8, int(a - 4), int(b), nil
	case a == b:
		return 0, 0, 0, fmt.Errorf("shape %v is ambiguous: the anchor dimension must be the larger", shape)
	}
	return 0, 0, 0, fmt.Errorf("shape %v has too few values per anchor", shape)
}
