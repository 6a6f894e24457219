package gateway

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestBodiesCostWhatArrivedNotWhatWasAnnounced(t *testing.T) {
	cases := []struct {
		name      string
		announced int64
		sent      int
		wantErr   error
		maxCap    int
	}{
		{"4 MiB announced, one byte sent", 4 << 20, 1, io.ErrUnexpectedEOF, presizeLimit},
		{"4 MiB announced, 100 KiB sent", 4 << 20, 100 << 10, io.ErrUnexpectedEOF, 2 * presizeLimit},
		{"1 MiB announced and sent ends in a buffer of exactly its size", 1 << 20, 1 << 20, nil, 1 << 20},
		{"unknown length, 300 KiB sent", -1, 300 << 10, nil, 4 * presizeLimit * 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := bytes.Repeat([]byte{'x'}, tc.sent)
			got, err := readGrowing(bytes.NewReader(body), tc.announced)
			if !errors.Is(err, tc.wantErr) && !(err == nil && tc.wantErr == nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if len(got) != tc.sent {
				t.Fatalf("read %d bytes, sent %d", len(got), tc.sent)
			}
			if cap(got) > tc.maxCap {
				t.Errorf("buffer of %d bytes for %d read (announced %d), want at most %d", cap(got), len(got), tc.announced, tc.maxCap)
			}
		})
	}
}
