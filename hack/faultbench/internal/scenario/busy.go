package scenario

import ()

// The busy scenario's settings. A broker refuses the sends that waited in its send queue longer
// than waitTimeMillsInSendQueue (200 ms by default) with SYSTEM_BUSY "[TIMEOUT_CLEAN_QUEUE]"; with
// the wait lowered to 0, every send still queued when the fast-failure sweep runs (every 10 ms) is
// refused, and the load keeps the queue from emptying.
const (
	BusyWaitMillis  = "0"
	RestWaitMillis  = "200" // RocketMQ's default, which every other run uses
	BusyLoadSenders = 32
)
