package main

import (
	"fmt"

	"github.com/detourmq/detour/pkg/brokersim"
)

// fleet is the brokersim brokers and name servers, one name server per Cluster.
type fleet struct {
	brokers     []*brokersim.Broker
	nameServers []*brokersim.NameServer
}

// topicName is the RocketMQ topic of the i-th Topic of Cluster c.
func topicName(c, i int) string { return fmt.Sprintf("T_c%d_%05d", c, i) }

// topicsOf is how many of the Topics Cluster c holds: an even share, the first ones one more.
func topicsOf(c int, cfg config) int {
	n := cfg.topics / cfg.clusters
	if c < cfg.topics%cfg.clusters {
		n++
	}
	return n
}

// startFleet starts every Cluster's brokers, each holding every topic of its Cluster, and its
// name server.
func startFleet(cfg config) (*fleet, error) {
	f := &fleet{}
	for c := range cfg.clusters {
		var members []*brokersim.Broker
		for b := range cfg.brokers {
			br, err := brokersim.StartBrokerWith(fmt.Sprintf("broker-%d", b), "127.0.0.1:0",
				brokersim.Options{CountOnly: true, Cluster: fmt.Sprintf("c%d", c)})
			if err != nil {
				f.close()
				return nil, err
			}
			f.brokers = append(f.brokers, br)
			members = append(members, br)
			for i := range topicsOf(c, cfg) {
				br.CreateTopic(topicName(c, i), 4)
			}
		}
		ns, err := brokersim.StartNameServer("127.0.0.1:0", members...)
		if err != nil {
			f.close()
			return nil, err
		}
		f.nameServers = append(f.nameServers, ns)
	}
	return f, nil
}

// close stops every broker and name server.
func (f *fleet) close() {
	for _, ns := range f.nameServers {
		_ = ns.Close()
	}
	for _, b := range f.brokers {
		_ = b.Close()
	}
}
