package remoting

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ErrBadResponse marks a response that decoded fine but lacks what its code promises (a SUCCESS
// send response without queueId, a route without a body, ...).
var ErrBadResponse = errors.New("remoting: bad response")

// Defaults a Java producer puts in every send header.
const (
	// DefaultTopic is the template topic brokers auto-create topics from (createTopicKey).
	DefaultTopic = "TBW102"
	// DefaultTopicQueueNums is the queue count requested for auto-created topics.
	DefaultTopicQueueNums = 4
	// DefaultRegionID is the region a send result reports when the broker names none.
	DefaultRegionID = "DefaultRegion"
)

// Permission bits of a topic (PermName).
const (
	PermInherit int32 = 1
	PermWrite   int32 = 2
	PermRead    int32 = 4
	// PermReadWrite is the usual permission of a topic.
	PermReadWrite = PermRead | PermWrite
)

// SendHeader is SendMessageRequestHeader, the custom header of SEND_MESSAGE (V1, long field
// names) and of SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (V2, one-letter names a..n).
type SendHeader struct {
	ProducerGroup         string
	Topic                 string
	DefaultTopic          string
	DefaultTopicQueueNums int32
	QueueID               int32
	SysFlag               int32
	BornTimestamp         int64 // unix milliseconds
	Flag                  int32
	Properties            string
	ReconsumeTimes        int32
	UnitMode              bool
	// MaxReconsumeTimes is only sent for retry topics; nil leaves it out.
	MaxReconsumeTimes *int32
	Batch             bool
	BrokerName        string
}

func itoa32(v int32) string { return strconv.FormatInt(int64(v), 10) }

// V1 returns the ext fields of the long-name header (SEND_MESSAGE, code 10). The broker name
// travels as the inherited RPC header field "bname".
func (h *SendHeader) V1() map[string]string { return h.extFields(0) }

// V2 returns the ext fields of the one-letter header (SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE).
func (h *SendHeader) V2() map[string]string { return h.extFields(1) }

// extFields renders the header with the names in column col of sendHeaderKeys (0: V1, 1: V2),
// the table ParseSendHeader reads with, so both directions agree on every name.
func (h *SendHeader) extFields(col int) map[string]string {
	m := make(map[string]string, len(sendHeaderKeys))
	set := func(i int, v string) { m[sendHeaderKeys[i][col]] = v }
	set(0, h.ProducerGroup)
	set(1, h.Topic)
	set(2, h.DefaultTopic)
	set(3, itoa32(h.DefaultTopicQueueNums))
	set(4, itoa32(h.QueueID))
	set(5, itoa32(h.SysFlag))
	set(6, strconv.FormatInt(h.BornTimestamp, 10))
	set(7, itoa32(h.Flag))
	set(8, h.Properties)
	set(9, itoa32(h.ReconsumeTimes))
	set(10, strconv.FormatBool(h.UnitMode))
	if h.MaxReconsumeTimes != nil {
		set(11, itoa32(*h.MaxReconsumeTimes))
	}
	set(12, strconv.FormatBool(h.Batch))
	if h.BrokerName != "" {
		set(13, h.BrokerName)
	}
	return m
}

// sendHeaderKeys lists the V1 name and V2 letter of every SendHeader field, in V2 order.
var sendHeaderKeys = [...][2]string{
	{"producerGroup", "a"}, {"topic", "b"}, {"defaultTopic", "c"}, {"defaultTopicQueueNums", "d"},
	{"queueId", "e"}, {"sysFlag", "f"}, {"bornTimestamp", "g"}, {"flag", "h"}, {"properties", "i"},
	{"reconsumeTimes", "j"}, {"unitMode", "k"}, {"maxReconsumeTimes", "l"}, {"batch", "m"}, {"bname", "n"},
}

// NewSendRequest returns a send request: SEND_BATCH_MESSAGE (V2 header) when h.Batch is set,
// otherwise SEND_MESSAGE_V2 when v2 is true or SEND_MESSAGE with the V1 header.
func NewSendRequest(h *SendHeader, body []byte, v2 bool) *Command {
	switch {
	case h.Batch:
		return NewRequest(SendBatchMessage, h.V2(), body)
	case v2:
		return NewRequest(SendMessageV2, h.V2(), body)
	}
	return NewRequest(SendMessage, h.V1(), body)
}

// ParseSendHeader reads the send header of a SEND_MESSAGE (V1), SEND_MESSAGE_V2 or
// SEND_BATCH_MESSAGE (V2) request, as a broker does. The fields RocketMQ marks not-null must be
// present and numeric fields must parse. Batch comes from the header's batch flag alone, not
// from the request code.
func ParseSendHeader(req *Command) (*SendHeader, error) {
	col := 0
	switch req.Code {
	case SendMessage, SendReplyMessage:
	case SendMessageV2, SendBatchMessage, SendReplyMessageV2:
		col = 1
	default:
		return nil, fmt.Errorf("remoting: request code %d is not a send", req.Code)
	}
	ext := req.ExtFields
	var firstErr error
	get := func(i int, required bool) (string, bool) {
		v, ok := ext[sendHeaderKeys[i][col]]
		if !ok && required && firstErr == nil {
			firstErr = fmt.Errorf("remoting: send header lacks required field %s", sendHeaderKeys[i][0])
		}
		return v, ok
	}
	num := func(i int, required bool, bits int) int64 {
		v, ok := get(i, required)
		if !ok {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("remoting: send header field %s=%q is not a %d-bit integer", sendHeaderKeys[i][0], v, bits)
		}
		return n
	}
	// Booleans parse as Boolean.parseBoolean does: "true" in any case is true, anything else
	// (absent included) false.
	flag := func(i int) bool {
		v, _ := get(i, false)
		return strings.EqualFold(v, "true")
	}
	h := &SendHeader{}
	h.ProducerGroup, _ = get(0, true)
	h.Topic, _ = get(1, true)
	h.DefaultTopic, _ = get(2, true)
	h.DefaultTopicQueueNums = int32(num(3, true, 32))
	h.QueueID = int32(num(4, true, 32))
	h.SysFlag = int32(num(5, true, 32))
	h.BornTimestamp = num(6, true, 64)
	h.Flag = int32(num(7, true, 32))
	h.Properties, _ = get(8, false)
	h.ReconsumeTimes = int32(num(9, false, 32))
	h.UnitMode = flag(10)
	if _, ok := ext[sendHeaderKeys[11][col]]; ok {
		v := int32(num(11, false, 32))
		h.MaxReconsumeTimes = &v
	}
	// Only the header makes a batch, as SendMessageProcessor branches on isBatch() alone: a
	// SEND_BATCH_MESSAGE without batch=true is stored as one message with the encoded batch
	// as its body.
	h.Batch = flag(12)
	h.BrokerName, _ = get(13, false)
	if firstErr != nil {
		return nil, firstErr
	}
	return h, nil
}

// SendResponse is the custom header of a send response (SendMessageResponseHeader) plus the
// broker's region and trace ext fields.
type SendResponse struct {
	// Code is the response code: Success, FlushDiskTimeout, FlushSlaveTimeout or SlaveNotAvailable.
	Code int16
	// MsgID is the broker's offset message id (header "msgId"), not the producer's UNIQ_KEY.
	MsgID         string
	QueueID       int32
	QueueOffset   int64
	TransactionID string
	BatchUniqID   string
	RegionID      string
	TraceOn       bool
}

// ParseSendResponse reads a send response. A code that does not mean "stored" gives a
// *ResponseError carrying the code and remark; a stored-class response that lacks msgId,
// queueId or queueOffset gives an error wrapping ErrBadResponse.
func ParseSendResponse(resp *Command) (SendResponse, error) {
	if !StoredOK(resp.Code) {
		return SendResponse{}, &ResponseError{Code: resp.Code, Remark: resp.Remark}
	}
	ext := resp.ExtFields
	r := SendResponse{Code: resp.Code, TransactionID: ext["transactionId"], BatchUniqID: ext["batchUniqId"]}
	var ok bool
	if r.MsgID, ok = ext["msgId"]; !ok {
		return SendResponse{}, fmt.Errorf("%w: send response %s lacks msgId", ErrBadResponse, ResponseCodeName(resp.Code))
	}
	q, err := strconv.ParseInt(ext["queueId"], 10, 32)
	if err != nil {
		return SendResponse{}, fmt.Errorf("%w: send response has queueId %q", ErrBadResponse, ext["queueId"])
	}
	r.QueueID = int32(q)
	if r.QueueOffset, err = strconv.ParseInt(ext["queueOffset"], 10, 64); err != nil {
		return SendResponse{}, fmt.Errorf("%w: send response has queueOffset %q", ErrBadResponse, ext["queueOffset"])
	}
	if r.RegionID = ext[PropertyMsgRegion]; r.RegionID == "" {
		r.RegionID = DefaultRegionID
	}
	r.TraceOn = ext[PropertyTraceSwitch] != "false"
	return r, nil
}

// NewSendResponse returns the response a broker gives to a stored send: the given code (Success
// or a degraded-durability code) with msgId, queueId, queueOffset, MSG_REGION and TRACE_ON, and
// transactionId / batchUniqId when set. extFields is always present, as Java clients require.
func NewSendResponse(req *Command, r SendResponse) *Command {
	resp := NewResponse(req, r.Code, "")
	ext := make(map[string]string, 7)
	ext["msgId"] = r.MsgID
	ext["queueId"] = itoa32(r.QueueID)
	ext["queueOffset"] = strconv.FormatInt(r.QueueOffset, 10)
	region := r.RegionID
	if region == "" {
		region = DefaultRegionID
	}
	ext[PropertyMsgRegion] = region
	ext[PropertyTraceSwitch] = strconv.FormatBool(r.TraceOn)
	if r.TransactionID != "" {
		ext["transactionId"] = r.TransactionID
	}
	if r.BatchUniqID != "" {
		ext["batchUniqId"] = r.BatchUniqID
	}
	resp.ExtFields = ext
	return resp
}

// NewOffsetMsgID returns a broker's offset message id: upper-case hex of the store host's
// address (4 or 16 bytes), its port (int32) and the commit-log offset (int64).
func NewOffsetMsgID(storeHost netip.AddrPort, commitLogOffset int64) string {
	ip := storeHost.Addr().Unmap().AsSlice()
	raw := make([]byte, 0, len(ip)+12)
	raw = append(raw, ip...)
	raw = binary.BigEndian.AppendUint32(raw, uint32(storeHost.Port()))
	raw = binary.BigEndian.AppendUint64(raw, uint64(commitLogOffset))
	out := make([]byte, 0, 2*len(raw))
	for _, b := range raw {
		out = append(out, upperHex[b>>4], upperHex[b&0xF])
	}
	return string(out)
}

// ParseOffsetMsgID splits an offset message id into store host and commit-log offset.
func ParseOffsetMsgID(id string) (netip.AddrPort, int64, error) {
	raw, err := hex.DecodeString(id)
	if err != nil || (len(raw) != 16 && len(raw) != 28) {
		return netip.AddrPort{}, 0, fmt.Errorf("remoting: %q is not an offset message id", id)
	}
	ipLen := len(raw) - 12
	addr, _ := netip.AddrFromSlice(raw[:ipLen])
	port := binary.BigEndian.Uint32(raw[ipLen:])
	off := int64(binary.BigEndian.Uint64(raw[ipLen+4:]))
	return netip.AddrPortFrom(addr, uint16(port)), off, nil
}

// NewGetRouteInfoRequest returns GET_ROUTEINFO_BY_TOPIC for a name server.
func NewGetRouteInfoRequest(topic string) *Command {
	return NewRequest(GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
}

// ParseRouteResponse reads a name server's answer to GET_ROUTEINFO_BY_TOPIC. TOPIC_NOT_EXIST and
// other failure codes give a *ResponseError.
func ParseRouteResponse(resp *Command) (*TopicRouteData, error) {
	if resp.Code != Success {
		return nil, &ResponseError{Code: resp.Code, Remark: resp.Remark}
	}
	if len(resp.Body) == 0 {
		return nil, fmt.Errorf("%w: route response without a body", ErrBadResponse)
	}
	r, err := DecodeTopicRouteData(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadResponse, err)
	}
	return r, nil
}

// NewGetMaxOffsetRequest returns GET_MAX_OFFSET for one queue (committed offsets, as Java sends).
func NewGetMaxOffsetRequest(topic string, queueID int32) *Command {
	return NewRequest(GetMaxOffset, map[string]string{
		"topic": topic, "queueId": itoa32(queueID), "committed": "true",
	}, nil)
}

// ParseMaxOffsetResponse reads the offset from a GET_MAX_OFFSET response.
func ParseMaxOffsetResponse(resp *Command) (int64, error) {
	if resp.Code != Success {
		return 0, &ResponseError{Code: resp.Code, Remark: resp.Remark}
	}
	v, err := strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: max offset response has offset %q", ErrBadResponse, resp.ExtFields["offset"])
	}
	return v, nil
}

// CreateTopicHeader is the part of CreateTopicRequestHeader (UPDATE_AND_CREATE_TOPIC) a topic's
// shape depends on.
type CreateTopicHeader struct {
	Topic          string
	ReadQueueNums  int32
	WriteQueueNums int32
	Perm           int32
	TopicSysFlag   int32
	Order          bool
}

// NewCreateTopicRequest returns UPDATE_AND_CREATE_TOPIC for one broker.
func NewCreateTopicRequest(topic string, readQueues, writeQueues, perm int32) *Command {
	return NewRequest(UpdateAndCreateTopic, map[string]string{
		"topic":           topic,
		"defaultTopic":    DefaultTopic,
		"readQueueNums":   itoa32(readQueues),
		"writeQueueNums":  itoa32(writeQueues),
		"perm":            itoa32(perm),
		"topicFilterType": "SINGLE_TAG",
		"topicSysFlag":    "0",
		"order":           "false",
	}, nil)
}

// ParseCreateTopicRequest reads an UPDATE_AND_CREATE_TOPIC request as a broker does.
func ParseCreateTopicRequest(req *Command) (*CreateTopicHeader, error) {
	ext := req.ExtFields
	h := &CreateTopicHeader{Topic: ext["topic"], Order: ext["order"] == "true"}
	if h.Topic == "" {
		return nil, errors.New("remoting: create topic request lacks topic")
	}
	for _, f := range []struct {
		key      string
		dst      *int32
		required bool
	}{
		{"readQueueNums", &h.ReadQueueNums, true},
		{"writeQueueNums", &h.WriteQueueNums, true},
		{"perm", &h.Perm, true},
		{"topicSysFlag", &h.TopicSysFlag, false},
	} {
		v, ok := ext[f.key]
		if !ok {
			if f.required {
				return nil, fmt.Errorf("remoting: create topic request lacks %s", f.key)
			}
			continue
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("remoting: create topic request has %s=%q", f.key, v)
		}
		*f.dst = int32(n)
	}
	return h, nil
}

// HeartbeatData is the JSON body of HEART_BEAT.
type HeartbeatData struct {
	ClientID        string         `json:"clientID"`
	ProducerDataSet []ProducerData `json:"producerDataSet"`
	ConsumerDataSet []any          `json:"consumerDataSet"`
}

// ProducerData names one producer group in a heartbeat.
type ProducerData struct {
	GroupName string `json:"groupName"`
}

// NewHeartbeatRequest returns HEART_BEAT announcing a client and its producer groups.
func NewHeartbeatRequest(clientID string, producerGroups ...string) *Command {
	hb := HeartbeatData{ClientID: clientID, ProducerDataSet: []ProducerData{}, ConsumerDataSet: []any{}}
	for _, g := range producerGroups {
		hb.ProducerDataSet = append(hb.ProducerDataSet, ProducerData{GroupName: g})
	}
	body, _ := json.Marshal(hb) // cannot fail: only strings and empty slices
	return NewRequest(HeartBeat, map[string]string{}, body)
}
