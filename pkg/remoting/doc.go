// Package remoting speaks Apache RocketMQ's remoting protocol over TCP: the RemotingCommand frame
// with either header serialisation (JSON or the binary ROCKETMQ form), the request and response
// codes producers and administration tools use, the send headers (V1 long names, V2 one-letter
// names), message properties, UNIQ_KEY message ids, batch bodies and name-server route data
// (including the legacy form with unquoted integer map keys).
//
// Client multiplexes requests over one connection per broker address, with per-request deadlines
// taken from a context.Context. FrameReader and FrameWriter are the buffered, batching frame I/O
// the client is built on; servers (such as the brokersim package) use them too.
package remoting
