package scenario

import (
	"time"
)

// Shape of the hang scenario: one send request in HangEvery that reaches the bad broker is held
// HangFor before the broker sees it, so that attempt alone hangs while the others are answered at
// once.
const (
	HangEvery = 10
	HangFor   = 5 * time.Second
	// HangBind is the loopback address the bad broker listens on while the gate sits at its
	// published address (127.0.0.1 and the same port) in front of it.
	HangBind = "127.0.0.2"
	// HangMaxFrame bounds a frame the gate reads, as a broker bounds it.
	HangMaxFrame = 16 << 20
)
