package brokersim

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/detourmq/detour/pkg/remoting"
)

// NameServer is a simulated RocketMQ name server. It answers GET_ROUTEINFO_BY_TOPIC from the
// topics of the brokers it knows, read live (a topic created on a broker is routable at once),
// and TOPIC_NOT_EXIST for topics no broker has. Like a Java name server it writes standard JSON
// to clients announcing version >= 401 or acceptStandardJsonOnly, and the legacy form with
// unquoted integer keys to older clients such as rocketmq-client-go.
type NameServer struct {
	srv *server

	mu      sync.RWMutex
	brokers []*Broker

	routeQueries atomic.Int64
}

// NameServerOptions configure a name server. The zero value behaves like a default Java name
// server.
type NameServerOptions struct {
	// IdleTimeout closes a client connection that has neither read nor written for this long,
	// as a Java name server does after serverChannelMaxIdleTimeSeconds. Zero means
	// DefaultIdleTimeout (120 s); a negative value keeps connections open forever.
	IdleTimeout time.Duration
	// Logger hears of every request whose handling panicked (its connection is closed, the
	// name server serves on); the zero value discards.
	Logger logr.Logger
}

// StartNameServer starts a name server on addr ("127.0.0.1:0" picks a free port) that knows the
// given brokers, with the default NameServerOptions.
func StartNameServer(addr string, brokers ...*Broker) (*NameServer, error) {
	return StartNameServerWith(addr, NameServerOptions{}, brokers...)
}

// StartNameServerWith starts a name server with options.
func StartNameServerWith(addr string, opts NameServerOptions, brokers ...*Broker) (*NameServer, error) {
	n := &NameServer{brokers: append([]*Broker(nil), brokers...)}
	n.srv = newServer(n.handle, idleTimeout(opts.IdleTimeout))
	n.srv.log = opts.Logger
	if err := n.srv.listen(addr); err != nil {
		return nil, fmt.Errorf("brokersim: name server: %w", err)
	}
	return n, nil
}

// Addr returns the name server's ip:port.
func (n *NameServer) Addr() string { return n.srv.addr }

// AddBroker makes a broker known (routable); a broker with the same name is replaced.
func (n *NameServer) AddBroker(b *Broker) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, old := range n.brokers {
		if old.Name() == b.Name() {
			n.brokers[i] = b
			return
		}
	}
	n.brokers = append(n.brokers, b)
}

// RemoveBroker forgets a broker by name, as a name server does when a broker unregisters.
func (n *NameServer) RemoveBroker(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, b := range n.brokers {
		if b.Name() == name {
			n.brokers = append(n.brokers[:i], n.brokers[i+1:]...)
			return
		}
	}
}

// IdleClosed counts the connections the name server closed because they were idle.
func (n *NameServer) IdleClosed() int64 { return n.srv.idleClosed.Load() }

// RouteQueries counts the GET_ROUTEINFO_BY_TOPIC requests answered.
func (n *NameServer) RouteQueries() int64 { return n.routeQueries.Load() }

// Panics counts requests whose handling panicked; each closed its connection only.
func (n *NameServer) Panics() int64 { return n.srv.panics.Load() }

// Route returns the route of topic over the known brokers, or nil when no broker has it.
func (n *NameServer) Route(topic string) *remoting.TopicRouteData {
	n.mu.RLock()
	brokers := append([]*Broker(nil), n.brokers...)
	n.mu.RUnlock()
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].Name() < brokers[j].Name() })
	r := &remoting.TopicRouteData{FilterServerTable: map[string][]string{}}
	for _, b := range brokers {
		cfg, ok := b.registered(topic)
		if !ok {
			continue
		}
		r.QueueDatas = append(r.QueueDatas, remoting.QueueData{
			BrokerName: b.Name(), ReadQueueNums: int32(cfg.ReadQueues), WriteQueueNums: int32(cfg.WriteQueues),
			Perm: cfg.Perm, TopicSysFlag: cfg.SysFlag,
		})
		r.BrokerDatas = append(r.BrokerDatas, remoting.BrokerData{
			Cluster: b.Cluster(), BrokerName: b.Name(), BrokerAddrs: map[int64]string{remoting.MasterID: b.Addr()},
		})
	}
	if len(r.QueueDatas) == 0 {
		return nil
	}
	return r
}

// Close stops the name server and waits for its goroutines.
func (n *NameServer) Close() error {
	n.srv.close()
	return nil
}

// standardJSONVersion is MQVersion V4_9_4, from which name servers answer standard JSON.
const standardJSONVersion = 401

func (n *NameServer) handle(sc *serverConn, req *remoting.Command) {
	if req.Code == remoting.GetBrokerClusterInfo {
		sc.respond(req, n.clusterInfo(req), false)
		return
	}
	if req.Code != remoting.GetRouteInfoByTopic {
		sc.respond(req, remoting.NewNotSupportedResponse(req), false)
		return
	}
	n.routeQueries.Add(1)
	topic := req.ExtFields["topic"]
	r := n.Route(topic)
	if r == nil {
		sc.respond(req, remoting.NewResponse(req, remoting.TopicNotExist, "No topic route info in name server for the topic: "+topic), false)
		return
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	if req.Version >= standardJSONVersion || req.ExtFields["acceptStandardJsonOnly"] == "true" {
		body, err := r.MarshalStandard()
		if err != nil {
			sc.respond(req, remoting.NewResponse(req, remoting.SystemError, err.Error()), false)
			return
		}
		resp.Body = body
	} else {
		resp.Body = r.MarshalLegacy()
	}
	sc.respond(req, resp, false)
}

// clusterInfo answers GET_BROKER_CLUSTER_INFO: every broker as the master of its group, grouped by
// cluster, in the shape of RocketMQ's ClusterInfo.
func (n *NameServer) clusterInfo(req *remoting.Command) *remoting.Command {
	n.mu.RLock()
	brokers := append([]*Broker(nil), n.brokers...)
	n.mu.RUnlock()
	info := remoting.ClusterInfo{BrokerAddrTable: map[string]remoting.BrokerData{}, ClusterAddrTable: map[string][]string{}}
	for _, b := range brokers {
		info.BrokerAddrTable[b.Name()] = remoting.BrokerData{Cluster: b.Cluster(), BrokerName: b.Name(),
			BrokerAddrs: map[int64]string{remoting.MasterID: b.Addr()}}
		info.ClusterAddrTable[b.Cluster()] = append(info.ClusterAddrTable[b.Cluster()], b.Name())
	}
	body, err := json.Marshal(info)
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}
