package facade

import "fmt"

// forwarded are the request codes the facade forwards: the reads RocketMQ's clients send to a
// name server (MQClientAPIImpl's name-server calls, including the admin reads mqadmin makes
// through it), all of which a name server's DefaultRequestProcessor or ClientRequestProcessor
// serves. Values and names are RocketMQ's RequestCode constants.
var forwarded = map[int16]string{
	101: "GET_KV_CONFIG",
	105: "GET_ROUTEINFO_BY_TOPIC",
	106: "GET_BROKER_CLUSTER_INFO",
	206: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
	219: "GET_KVLIST_BY_NAMESPACE",
	224: "GET_TOPICS_BY_CLUSTER",
	304: "GET_SYSTEM_TOPIC_LIST_FROM_NS",
	311: "GET_UNIT_TOPIC_LIST",
	312: "GET_HAS_UNIT_SUB_TOPIC_LIST",
	313: "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST",
	319: "GET_NAMESRV_CONFIG",
}

// writes are the other requests a name server serves: they change it, or come from brokers (which
// register, heartbeat and compare data versions with the name servers themselves, never through
// the facade). They are refused like any code not forwarded; naming them makes the refusal say
// what was refused.
var writes = map[int16]string{
	100: "PUT_KV_CONFIG",
	102: "DELETE_KV_CONFIG",
	103: "REGISTER_BROKER",
	104: "UNREGISTER_BROKER",
	205: "WIPE_WRITE_PERM_OF_BROKER",
	216: "DELETE_TOPIC_IN_NAMESRV",
	217: "REGISTER_TOPIC_IN_NAMESRV",
	318: "UPDATE_NAMESRV_CONFIG",
	322: "QUERY_DATA_VERSION",
	327: "ADD_WRITE_PERM_OF_BROKER",
	901: "GET_BROKER_MEMBER_GROUP",
	904: "BROKER_HEARTBEAT",
}

// CodeName returns RocketMQ's name of a request code a name server serves, and whether the facade
// knows it. Any peer may send any code: label metrics with known codes only, so their series stay
// bounded.
func CodeName(code int16) (string, bool) {
	if n, ok := forwarded[code]; ok {
		return n, true
	}
	n, ok := writes[code]
	return n, ok
}

// refusal is the remark of the NO_PERMISSION answer to a request the facade does not forward.
func refusal(code int16) string {
	if name, ok := writes[code]; ok {
		return fmt.Sprintf("detour's name-server facade forwards only reads; send %s (%d) to a name server directly", name, code)
	}
	return fmt.Sprintf("detour's name-server facade forwards only reads RocketMQ clients send to a name server; request code %d is not one of them", code)
}
