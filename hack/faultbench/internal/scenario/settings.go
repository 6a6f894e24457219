package scenario

import "time"

// The busy scenario's settings. A broker refuses the sends that waited in its send queue longer
// than waitTimeMillsInSendQueue (200 ms by default) with SYSTEM_BUSY "[TIMEOUT_CLEAN_QUEUE]"; with
// the wait lowered to 0, every send still queued when the fast-failure sweep runs (every 10 ms) is
// refused, and the load keeps the queue from emptying.
const (
	BusyWaitMillis  = "0"
	BusyLoadSenders = 32
)

// Shape of the hang scenarios: one send request in HangEvery (HangEveryRare in hang-100) that
// reaches the bad broker is held HangFor before the broker sees it, so that attempt alone hangs
// while the others are answered at once.
const (
	HangEvery     = 10
	HangEveryRare = 100
	HangFor       = 5 * time.Second
)
