package remoting

import "strconv"

// Request codes used by producers, the name server and administration tools. The values are
// RocketMQ's RequestCode constants; codes that do not fit in an int16 (such as POP_MESSAGE) cannot
// travel in a ROCKETMQ binary header and are not listed.
const (
	SendMessage              int16 = 10
	PullMessage              int16 = 11
	QueryMessage             int16 = 12
	QueryConsumerOffset      int16 = 14
	UpdateConsumerOffset     int16 = 15
	UpdateAndCreateTopic     int16 = 17
	UpdateAndCreateTopicList int16 = 18
	GetBrokerConfig          int16 = 26
	GetBrokerRuntimeInfo     int16 = 28
	SearchOffsetByTimestamp  int16 = 29
	GetMaxOffset             int16 = 30
	GetMinOffset             int16 = 31
	GetEarliestMsgStoreTime  int16 = 32
	ViewMessageByID          int16 = 33
	HeartBeat                int16 = 34
	UnregisterClient         int16 = 35
	ConsumerSendMsgBack      int16 = 36
	EndTransaction           int16 = 37
	GetConsumerListByGroup   int16 = 38
	CheckTransactionState    int16 = 39
	NotifyConsumerIDsChanged int16 = 40
	GetKVConfig              int16 = 101
	RegisterBroker           int16 = 103
	UnregisterBroker         int16 = 104
	GetRouteInfoByTopic      int16 = 105
	GetBrokerClusterInfo     int16 = 106
	GetTopicStatsInfo        int16 = 202
	GetAllTopicListFromNS    int16 = 206
	DeleteTopicInBroker      int16 = 215
	DeleteTopicInNamesrv     int16 = 216
	SendMessageV2            int16 = 310
	SendBatchMessage         int16 = 320
	SendReplyMessage         int16 = 324
	SendReplyMessageV2       int16 = 325
	LitePullMessage          int16 = 361
	RecallMessage            int16 = 370
)

// Response codes (RocketMQ's RemotingSysResponseCode and ResponseCode). Only SUCCESS and the three
// "stored but" codes (FlushDiskTimeout, FlushSlaveTimeout, SlaveNotAvailable) mean a send was
// stored; every other code is a broker-side failure.
const (
	Success                    int16 = 0
	SystemError                int16 = 1
	SystemBusy                 int16 = 2
	RequestCodeNotSupported    int16 = 3
	TransactionFailed          int16 = 4
	FlushDiskTimeout           int16 = 10
	SlaveNotAvailable          int16 = 11
	FlushSlaveTimeout          int16 = 12
	MessageIllegal             int16 = 13
	ServiceNotAvailable        int16 = 14
	VersionNotSupported        int16 = 15
	NoPermission               int16 = 16
	TopicNotExist              int16 = 17
	TopicExistAlready          int16 = 18
	PullNotFound               int16 = 19
	PullRetryImmediately       int16 = 20
	PullOffsetMoved            int16 = 21
	QueryNotFound              int16 = 22
	SubscriptionParseFailed    int16 = 23
	SubscriptionNotExist       int16 = 24
	SubscriptionNotLatest      int16 = 25
	SubscriptionGroupNotExist  int16 = 26
	FilterDataNotExist         int16 = 27
	FilterDataNotLatest        int16 = 28
	InvalidParameter           int16 = 29
	TransactionShouldCommit    int16 = 200
	TransactionShouldRollback  int16 = 201
	TransactionStateUnknown    int16 = 202
	TransactionStateGroupWrong int16 = 203
	NoBuyerID                  int16 = 204
	NotInCurrentUnit           int16 = 205
	ConsumerNotOnline          int16 = 206
	ConsumeMsgTimeout          int16 = 207
	NoMessage                  int16 = 208
	PollingFull                int16 = 209
	PollingTimeout             int16 = 210
	BrokerNotExist             int16 = 211
	BrokerDispatchNotComplete  int16 = 212
	BroadcastConsumption       int16 = 213
	FlowControl                int16 = 215
	NotLeaderForQueue          int16 = 501
	IllegalOperation           int16 = 604
	GoAway                     int16 = 1500
	RPCUnknown                 int16 = -1000
	RPCAddrIsNull              int16 = -1002
	RPCSendToChannelFailed     int16 = -1004
	RPCTimeOut                 int16 = -1006
)

// DefaultVersion is the protocol version this package puts in requests: the ordinal of
// MQVersion.V5_3_3, the version current Java clients announce. Servers gate some behaviour on it
// (a name server answers standard JSON routes for versions >= 401; a shutting-down server answers
// GO_AWAY only for versions > 475).
const DefaultVersion int16 = 479

// DefaultLanguage is the language name this package puts in requests.
const DefaultLanguage = "GO"

// languageNames maps RocketMQ's LanguageCode bytes (the ROCKETMQ header's language field) to the
// enum names carried by JSON headers.
var languageNames = [...]string{
	0: "JAVA", 1: "CPP", 2: "DOTNET", 3: "PYTHON", 4: "DELPHI", 5: "ERLANG", 6: "RUBY",
	7: "OTHER", 8: "HTTP", 9: "GO", 10: "PHP", 11: "OMS", 12: "RUST", 13: "NODE_JS",
}

// languageOther is the code used for a language name RocketMQ does not know.
const languageOther byte = 7

// LanguageName returns the JSON name of a ROCKETMQ language code; unknown codes give "OTHER".
func LanguageName(code byte) string {
	if int(code) < len(languageNames) {
		return languageNames[code]
	}
	return languageNames[languageOther]
}

// LanguageCode returns the ROCKETMQ byte for a language name; unknown names give OTHER's code.
func LanguageCode(name string) byte {
	switch name {
	case "GO":
		return 9
	case "JAVA":
		return 0
	}
	for i, n := range languageNames {
		if n == name {
			return byte(i)
		}
	}
	return languageOther
}

var requestCodeNames = map[int16]string{
	SendMessage: "SEND_MESSAGE", PullMessage: "PULL_MESSAGE", QueryMessage: "QUERY_MESSAGE",
	QueryConsumerOffset: "QUERY_CONSUMER_OFFSET", UpdateConsumerOffset: "UPDATE_CONSUMER_OFFSET",
	UpdateAndCreateTopic: "UPDATE_AND_CREATE_TOPIC", UpdateAndCreateTopicList: "UPDATE_AND_CREATE_TOPIC_LIST",
	GetBrokerConfig:      "GET_BROKER_CONFIG",
	GetBrokerRuntimeInfo: "GET_BROKER_RUNTIME_INFO", SearchOffsetByTimestamp: "SEARCH_OFFSET_BY_TIMESTAMP", GetMaxOffset: "GET_MAX_OFFSET",
	GetMinOffset: "GET_MIN_OFFSET", GetEarliestMsgStoreTime: "GET_EARLIEST_MSG_STORETIME",
	ViewMessageByID: "VIEW_MESSAGE_BY_ID", HeartBeat: "HEART_BEAT", UnregisterClient: "UNREGISTER_CLIENT",
	ConsumerSendMsgBack: "CONSUMER_SEND_MSG_BACK", EndTransaction: "END_TRANSACTION",
	GetConsumerListByGroup: "GET_CONSUMER_LIST_BY_GROUP", CheckTransactionState: "CHECK_TRANSACTION_STATE",
	NotifyConsumerIDsChanged: "NOTIFY_CONSUMER_IDS_CHANGED", GetKVConfig: "GET_KV_CONFIG",
	RegisterBroker: "REGISTER_BROKER", UnregisterBroker: "UNREGISTER_BROKER",
	GetRouteInfoByTopic: "GET_ROUTEINFO_BY_TOPIC", GetBrokerClusterInfo: "GET_BROKER_CLUSTER_INFO",
	GetTopicStatsInfo: "GET_TOPIC_STATS_INFO", GetAllTopicListFromNS: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
	DeleteTopicInBroker: "DELETE_TOPIC_IN_BROKER", DeleteTopicInNamesrv: "DELETE_TOPIC_IN_NAMESRV",
	SendMessageV2: "SEND_MESSAGE_V2", SendBatchMessage: "SEND_BATCH_MESSAGE",
	SendReplyMessage: "SEND_REPLY_MESSAGE", SendReplyMessageV2: "SEND_REPLY_MESSAGE_V2",
	LitePullMessage: "LITE_PULL_MESSAGE", RecallMessage: "RECALL_MESSAGE",
}

var responseCodeNames = map[int16]string{
	Success: "SUCCESS", SystemError: "SYSTEM_ERROR", SystemBusy: "SYSTEM_BUSY",
	RequestCodeNotSupported: "REQUEST_CODE_NOT_SUPPORTED", TransactionFailed: "TRANSACTION_FAILED",
	FlushDiskTimeout: "FLUSH_DISK_TIMEOUT", SlaveNotAvailable: "SLAVE_NOT_AVAILABLE",
	FlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT", MessageIllegal: "MESSAGE_ILLEGAL",
	ServiceNotAvailable: "SERVICE_NOT_AVAILABLE", VersionNotSupported: "VERSION_NOT_SUPPORTED",
	NoPermission: "NO_PERMISSION", TopicNotExist: "TOPIC_NOT_EXIST", TopicExistAlready: "TOPIC_EXIST_ALREADY",
	PullNotFound: "PULL_NOT_FOUND", PullRetryImmediately: "PULL_RETRY_IMMEDIATELY",
	PullOffsetMoved: "PULL_OFFSET_MOVED", QueryNotFound: "QUERY_NOT_FOUND",
	SubscriptionParseFailed: "SUBSCRIPTION_PARSE_FAILED", SubscriptionNotExist: "SUBSCRIPTION_NOT_EXIST",
	SubscriptionNotLatest: "SUBSCRIPTION_NOT_LATEST", SubscriptionGroupNotExist: "SUBSCRIPTION_GROUP_NOT_EXIST",
	FilterDataNotExist: "FILTER_DATA_NOT_EXIST", FilterDataNotLatest: "FILTER_DATA_NOT_LATEST",
	InvalidParameter: "INVALID_PARAMETER", TransactionShouldCommit: "TRANSACTION_SHOULD_COMMIT",
	TransactionShouldRollback: "TRANSACTION_SHOULD_ROLLBACK", TransactionStateUnknown: "TRANSACTION_STATE_UNKNOW",
	TransactionStateGroupWrong: "TRANSACTION_STATE_GROUP_WRONG", NoBuyerID: "NO_BUYER_ID",
	NotInCurrentUnit: "NOT_IN_CURRENT_UNIT", ConsumerNotOnline: "CONSUMER_NOT_ONLINE",
	ConsumeMsgTimeout: "CONSUME_MSG_TIMEOUT", NoMessage: "NO_MESSAGE", PollingFull: "POLLING_FULL",
	PollingTimeout: "POLLING_TIMEOUT", BrokerNotExist: "BROKER_NOT_EXIST",
	BrokerDispatchNotComplete: "BROKER_DISPATCH_NOT_COMPLETE", BroadcastConsumption: "BROADCAST_CONSUMPTION",
	FlowControl: "FLOW_CONTROL", NotLeaderForQueue: "NOT_LEADER_FOR_QUEUE", IllegalOperation: "ILLEGAL_OPERATION",
	GoAway: "GO_AWAY", RPCUnknown: "RPC_UNKNOWN", RPCAddrIsNull: "RPC_ADDR_IS_NULL",
	RPCSendToChannelFailed: "RPC_SEND_TO_CHANNEL_FAILED", RPCTimeOut: "RPC_TIME_OUT",
}

// RequestCodeName returns RocketMQ's name for a request code, or the number when it is not known.
func RequestCodeName(code int16) string {
	if n, ok := requestCodeNames[code]; ok {
		return n
	}
	return strconv.Itoa(int(code))
}

// ResponseCodeName returns RocketMQ's name for a response code, or the number when it is not known.
func ResponseCodeName(code int16) string {
	if n, ok := responseCodeNames[code]; ok {
		return n
	}
	return strconv.Itoa(int(code))
}

// StoredOK reports whether a send response code means the broker stored the message: SUCCESS and
// the three degraded-durability codes that Java producers report as send statuses rather than
// exceptions.
func StoredOK(code int16) bool {
	switch code {
	case Success, FlushDiskTimeout, FlushSlaveTimeout, SlaveNotAvailable:
		return true
	}
	return false
}
