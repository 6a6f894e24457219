package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/detourmq/detour/pkg/producer"
)

// pressureCollector exports what brokers last said of their send path (producer.Runtime
// Pressure), read at scrape time, so no figure is older than the poll it came from and series
// go with the brokers and policies that are polled. A figure a broker did not report is left
// out.
type pressureCollector struct {
	mu sync.Mutex
	rt *producer.Runtime

	fill, headWait, lock, put, pressed *prometheus.Desc
	waitLimit, lockLimit               *prometheus.Desc
}

// newPressureCollector returns a collector of pressure figures, with no runtime behind it yet.
func newPressureCollector() *pressureCollector {
	labels := []string{"policy", "broker"}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("detour_broker_"+name, help, labels, nil)
	}
	return &pressureCollector{
		fill:     desc("send_queue_fill_percent", "The broker's send queue as a share of its capacity, as it last said (GET_BROKER_RUNTIME_INFO)."),
		headWait: desc("send_queue_head_wait_seconds", "How long the oldest send in the broker's send queue had waited, as it last said."),
		lock:     desc("page_cache_lock_seconds", "How long the broker's put in progress had held the commit log's lock, as it last said."),
		put:      desc("put_latency_p99_seconds", "The 99th percentile of the broker's recent put times, as it last said."),
		pressed:  desc("pressed", "1 when the broker's last figures crossed its FaultPolicy's pressure thresholds, else 0."),
		waitLimit: desc("send_queue_wait_limit_seconds", "The broker's own waitTimeMillsInSendQueue, as last read (GET_BROKER_CONFIG): "+
			"it refuses a send that waited this long; pressure counts from half of it when that is sooner than the policy's threshold."),
		lockLimit: desc("page_cache_busy_limit_seconds", "The broker's own osPageCacheBusyTimeOutMills, as last read: it refuses sends "+
			"while its page cache is locked longer; pressure counts from half of it when that is sooner than the policy's threshold."),
	}
}

// observe points the collector at rt.
func (c *pressureCollector) observe(rt *producer.Runtime) {
	c.mu.Lock()
	c.rt = rt
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *pressureCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.fill, c.headWait, c.lock, c.put, c.pressed, c.waitLimit, c.lockLimit} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *pressureCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	rt := c.rt
	c.mu.Unlock()
	if rt == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, policy, broker string) {
		if v >= 0 {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, policy, broker)
		}
	}
	for policy, figs := range rt.AllPressure() {
		for _, f := range figs {
			gauge(c.fill, f.SendQueueFillPercent(), policy, f.Broker)
			gauge(c.headWait, millisToSeconds(float64(f.SendQueueHeadWaitMillis)), policy, f.Broker)
			gauge(c.lock, millisToSeconds(float64(f.PageCacheLockMillis)), policy, f.Broker)
			gauge(c.put, millisToSeconds(f.PutLatency99Millis), policy, f.Broker)
			gauge(c.waitLimit, millisToSeconds(float64(f.Limits.SendQueueWaitMillis)), policy, f.Broker)
			gauge(c.lockLimit, millisToSeconds(float64(f.Limits.PageCacheBusyMillis)), policy, f.Broker)
			gauge(c.pressed, boolGauge(f.Pressed), policy, f.Broker)
		}
	}
}

// millisToSeconds converts a figure in ms, keeping -1 (unknown) negative.
func millisToSeconds(ms float64) float64 {
	if ms < 0 {
		return -1
	}
	return ms / 1000
}
