package remoting

import (
	"errors"
	"sync"
	"testing"
)

// stuckWriter is a peer that never reads: every Write blocks until Close.
type stuckWriter struct {
	once   sync.Once
	closed chan struct{}
}

func (s *stuckWriter) Write(p []byte) (int, error) { <-s.closed; return 0, errors.New("closed") }
func (s *stuckWriter) Close() error                { s.once.Do(func() { close(s.closed) }); return nil }

func TestAPeerThatNeverReadsCostsItsConnectionNotUnboundedMemory(t *testing.T) {
	for _, queued := range []bool{true, false} {
		name := map[bool]string{true: "queued writer (client)", false: "flushing writer (server)"}[queued]
		t.Run(name, func(t *testing.T) {
			w := &stuckWriter{closed: make(chan struct{})}
			var fw *FrameWriter
			stop := make(chan struct{})
			defer close(stop)
			if queued {
				fw = NewQueuedFrameWriter(w, 0)
				go fw.Run(stop)
			} else {
				fw = NewFrameWriter(w, 0)
			}
			frame := make([]byte, 1<<20)
			// A flushing writer's first Write blocks in the stuck peer: run the writes beside it.
			done := make(chan error, 1)
			go func() {
				for i := 0; i < 2*MaxQueuedBytes/len(frame); i++ {
					if err := fw.Write(frame); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			if queued {
				if err := <-done; !errors.Is(err, ErrQueueFull) {
					t.Fatalf("writes to a peer that never reads ended with %v, want ErrQueueFull", err)
				}
			} else {
				// The other writers queue behind the blocked flush until the bound.
				for range 2 * MaxQueuedBytes / len(frame) {
					go func() { _ = fw.Write(frame) }()
				}
				<-w.closed // the overflow closes the peer, which ends the blocked flush
				if err := <-done; err == nil {
					t.Fatal("writes went on after the queue bound")
				}
			}
			select {
			case <-w.closed:
			default:
				t.Fatal("the connection to the peer that never reads was not closed")
			}
		})
	}
}
