package scenario

import "time"

// Params is the workload every run gets.
type Params struct {
	Duration time.Duration
	Rate     int // messages per second, over all senders
	Senders  int
	// Drain bounds the wait for sends still in flight when the run's time is up.
	Drain   time.Duration
	BodyLen int
	// ScheduleSlack is how late a fault step may be carried out before the run is flagged as not
	// comparable (the machine stalled the schedule).
	ScheduleSlack time.Duration
}

// Scheduled is how many sends a run schedules.
func (p Params) Scheduled() int { return int(p.Duration.Seconds() * float64(p.Rate)) }

// Interval is the time between two scheduled sends.
func (p Params) Interval() time.Duration { return time.Second / time.Duration(p.Rate) }

// AppliedAction is a timeline step as it was carried out.
type AppliedAction struct {
	Note      string        `json:"note"`
	Scheduled time.Duration `json:"scheduled"`
	Applied   time.Duration `json:"applied"`
	// Done is when the step had taken effect (a restart: the broker registered again).
	Done time.Duration `json:"done"`
	// Chained steps follow the previous one as soon as it is done, so they are not late.
	Chained bool `json:"chained"`
}

// RunData is everything one run measured.
type RunData struct {
	Scenario Scenario
	Strategy string
	Rep      int
	Params   Params
	Sends    []SendRec
	Attempts []AttemptRec
	Isos     []IsoRec
	Applied  []AppliedAction
	// ApplyErrors are schedule steps that failed (a broker that did not come back).
	ApplyErrors []string
	Abandoned   int // sends still in flight when the drain time ran out
	// BadSendsReceived is what the bad broker itself counted (send requests read) during the
	// measured run; WarmupBadSends what it had counted before.
	BadSendsReceived int64
	WarmupBadSends   int64
	Elapsed          time.Duration
	// Noise holds how late 1 ms sleeps woke up during the run: the machine's scheduling noise,
	// which every latency here includes.
	Noise []time.Duration
	// Hedges is what the hedges of detour's runtime did (zero for strategies that do not hedge).
	Hedges HedgeCounts
	// BadFrom says where the bad shares come from when the sends do not list their attempts'
	// brokers (RocketMQ's gRPC SDK does not say where an attempt went).
	BadFrom BadSource
}

// Onset returns when the schedule's first step was carried out, or when it was due if the run
// ended before.
func (d *RunData) Onset() time.Duration {
	if len(d.Applied) > 0 {
		return d.Applied[0].Applied
	}
	return d.Scenario.Onset
}

// BadSource is what a run's bad shares are counted from.
type BadSource int

const (
	// BadFromSends counts sends that list an attempt on the bad broker.
	BadFromSends BadSource = iota
	// BadFromAttempts counts the attempts detour's runtime made on the bad broker for sends it
	// took from a client (its gRPC endpoint): attempts on the bad broker over sends, an upper
	// bound of the share of sends that reached it, capped at 100.
	BadFromAttempts
	// BadUnknown: nothing says where attempts went (the SDK through RocketMQ's Proxy).
	BadUnknown
)

// BrokerInfo is a broker's name and address as the strategies see them.
type BrokerInfo struct{ Name, Addr string }

// SendRec is one send of the workload, with times relative to the start of the run.
type SendRec struct {
	Seq     int           `json:"seq"`
	Due     time.Duration `json:"due"`
	Start   time.Duration `json:"start"`
	Latency time.Duration `json:"latency"`
	OK      bool          `json:"ok"`
	// Broker is the broker that stored the message ("" when the send failed).
	Broker string `json:"broker,omitempty"`
	// Tried lists the broker of every attempt, in order.
	Tried []string `json:"tried"`
	Err   string   `json:"err,omitempty"`
}

// AttemptRec is one attempt of a send on one broker.
type AttemptRec struct {
	Broker     string
	Start, End time.Duration
	OK         bool
}

// IsoRec is an isolation change of the bad broker reported by the runtime.
type IsoRec struct {
	At       time.Duration
	Isolated bool
	Reason   string
}

// HedgeCounts counts the hedge events of a run's runtime (producer.HedgeEvent): hedges sent, won
// (answered the send), lost, copies stored (both attempts stored the message) and hedges the budget
// refused.
type HedgeCounts struct {
	Sent        int `json:"sent"`
	Won         int `json:"won"`
	Lost        int `json:"lost"`
	CopyStored  int `json:"copyStored"`
	BudgetSpent int `json:"budgetSpent"`
}
