// Package running runs one strategy against one scenario: it warms the driver up, sends the paced
// workload from several senders over one shared schedule while the scenario's fault steps run on
// the same clock, and gathers the run's records. Env is what a run needs of its brokers; the
// brokersim environment, fresh for every run, lives here, the real one in realenv.
package running
