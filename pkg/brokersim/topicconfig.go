package brokersim

import (
	"encoding/json"

	"github.com/detourmq/detour/pkg/remoting"
)

// topicConfigJSON is the part of a RocketMQ 5.x broker's GET_TOPIC_CONFIG answer the simulator
// writes: the topic's name, queues, permission and attributes (none).
type topicConfigJSON struct {
	TopicName      string            `json:"topicName"`
	ReadQueueNums  int               `json:"readQueueNums"`
	WriteQueueNums int               `json:"writeQueueNums"`
	Perm           int32             `json:"perm"`
	TopicSysFlag   int32             `json:"topicSysFlag"`
	Attributes     map[string]string `json:"attributes"`
}

// topicConfigAnswer answers GET_TOPIC_CONFIG as AdminBrokerProcessor.getTopicConfig does: the
// topic's configuration as JSON, or TOPIC_NOT_EXIST with its remark for a topic the broker lacks.
func (b *Broker) topicConfigAnswer(req *remoting.Command) *remoting.Command {
	topic := req.ExtFields["topic"]
	tc, ok := b.topic(topic)
	if !ok {
		return remoting.NewResponse(req, remoting.TopicNotExist, "No topic in this broker. topic: "+topic)
	}
	body, err := json.Marshal(topicConfigJSON{TopicName: tc.Name, ReadQueueNums: tc.ReadQueues, WriteQueueNums: tc.WriteQueues,
		Perm: tc.Perm, TopicSysFlag: tc.SysFlag, Attributes: map[string]string{}})
	if err != nil {
		return remoting.NewResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}
