package producer

import (
	"fmt"
	"time"

	"github.com/detourmq/detour/pkg/remoting"
)

// The send loop's own small pieces: the header values every send carries, what a stored-class
// answer is called, the refusals a send remembers and the properties' size rule the loop checks
// once it has added its own.

// Header values RocketMQ's Java producer puts into every send.
const (
	defaultTopicKey       = "TBW102"
	defaultTopicQueueNums = 4
)

// sendStatus maps a stored-class response code to RocketMQ's SendStatus name.
func sendStatus(code int16) (string, bool) {
	switch code {
	case remoting.Success:
		return StatusSendOK, true
	case remoting.FlushDiskTimeout:
		return StatusFlushDiskTimeout, true
	case remoting.FlushSlaveTimeout:
		return StatusFlushSlaveTimeout, true
	case remoting.SlaveNotAvailable:
		return StatusSlaveNotAvailable, true
	}
	return "", false
}

// messageRefusal is one broker's refusal of the message itself (MESSAGE_ILLEGAL), kept until the
// send ends: if another broker then stores the message, the refusing broker is at fault.
type messageRefusal struct {
	err     *BrokerError
	latency time.Duration
}

// refusedBy reports whether broker is among the refusals.
func refusedBy(refusals []messageRefusal, broker string) bool {
	for _, rf := range refusals {
		if rf.err.Broker == broker {
			return true
		}
	}
	return false
}

// checkPropertiesSize refuses encoded properties of n bytes that no broker stores.
func checkPropertiesSize(n int) error {
	if n > MaxPropertiesSize {
		return &ValidationError{Code: CodeMessageIllegal, Rule: ErrPropertiesTooLarge,
			Message: fmt.Sprintf("the message properties length is %d bytes, over the broker's limit of %d", n, MaxPropertiesSize)}
	}
	return nil
}
