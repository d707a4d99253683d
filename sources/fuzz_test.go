package sources

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/bluenviron/gortsplib/v4/pkg/description"
	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/pion/rtp"

	"github.com/visiond/visiond/internal/testutil"
)

// FuzzDepacketizeDecode drives the whole receive path of an RTSP session with arbitrary RTP
// packets: depacketizer, random-access detection, the bounded queue, decoder and letterbox,
// for H.264 and H.265. Input: packets, each behind a 2-byte big-endian length. Seeds are
// the sample's first access units, packetized as a camera would send them.
func FuzzDepacketizeDecode(f *testing.F) {
	aus, _ := sampleAUs(f, 12)
	h264f := &format.H264{PayloadTyp: 96, PacketizationMode: 1}
	enc, err := h264f.CreateEncoder()
	if err != nil {
		f.Fatal(err)
	}
	var stream []byte
	for i, au := range aus {
		pkts, err := enc.Encode(splitAnnexB(au.data))
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range pkts {
			p.Timestamp = uint32(i * 9000)
			b, err := p.Marshal()
			if err != nil {
				f.Fatal(err)
			}
			stream = binary.BigEndian.AppendUint16(stream, uint16(len(b)))
			stream = append(stream, b...)
		}
		if i == 1 || i == 3 {
			f.Add(false, stream) // whole access units
			f.Add(false, stream[:len(stream)*2/3])
		}
	}
	f.Add(true, stream[:min(len(stream), 4000)]) // H.264 packets read as H.265: all garbage
	f.Add(false, []byte{0, 12, 0x80, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1})

	f.Fuzz(func(t *testing.T, h265 bool, data []byte) {
		var forma format.Format = &format.H264{PayloadTyp: 96, PacketizationMode: 1}
		if h265 {
			forma = &format.H265{PayloadTyp: 96}
		}
		track, err := findVideo(&description.Session{Medias: []*description.Media{{Type: description.MediaTypeVideo, Formats: []format.Format{forma}}}})
		if err != nil {
			t.Fatal(err)
		}
		cam := &Camera{ID: "fuzz", InputW: 160, InputH: 160, Logger: (&testutil.LogBuffer{}).Logger()}
		cam.init()
		dec, err := newDecoder(track.codec, DecoderCPU)
		if err != nil {
			t.Fatal(err)
		}
		defer dec.close()
		recv := newReceiver(cam, track, 4)
		loop := &decodeLoop{cam: cam, dec: dec, needKey: true}
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				break
			}
			var pkt rtp.Packet
			if pkt.Unmarshal(data[:n]) == nil {
				recv.push(&pkt, time.Now())
			}
			data = data[n:]
			for len(recv.queue) > 0 {
				au := <-recv.queue
				loop.handle(au)
				recv.recycle(au)
			}
		}
		if st := cam.Status(); testing.Verbose() && st.Frames > 0 {
			t.Logf("decoded %d frames", st.Frames)
		}
		if st := cam.Status(); st.Delivered > st.Frames {
			t.Fatalf("status %+v: more frames delivered than decoded", st)
		}
	})
}

// splitAnnexB splits an Annex-B access unit made by appendAnnexB (4-byte start codes) into
// its NAL units.
func splitAnnexB(b []byte) [][]byte {
	var nalus [][]byte
	start := -1
	for i := 0; i+4 <= len(b); i++ {
		if b[i] == 0 && b[i+1] == 0 && b[i+2] == 0 && b[i+3] == 1 {
			if start >= 0 {
				nalus = append(nalus, b[start:i])
			}
			start = i + 4
			i += 3
		}
	}
	if start >= 0 && start <= len(b) {
		nalus = append(nalus, b[start:])
	}
	return nalus
}
