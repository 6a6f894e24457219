package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"runtime/debug"
	"sync"
	"time"

	"github.com/detourmq/detour/internal/front"
	"github.com/detourmq/detour/internal/kubeauth"
	"github.com/detourmq/detour/pkg/metrics"
	"github.com/detourmq/detour/pkg/producer"
	"github.com/detourmq/detour/pkg/scope"
)

// MessagesPath is the route of the send endpoint; {name} is the Topic resource's name. (The
// route by a Cluster and a RocketMQ topic is ClusterMessagesPath.)
const MessagesPath = "/v1/namespaces/{namespace}/topics/{name}/messages"

// Machine-readable codes of ErrorResponse, one per way a request can fail.
const (
	CodeInvalidMessage   = "InvalidMessage"   // 400: the message breaks RocketMQ's rules or the request is malformed
	CodeUnauthorized     = "Unauthorized"     // 401: no token, or the API server did not accept it
	CodeForbidden        = "Forbidden"        // 403: the caller may not create topics/messages (or clusters/messages) here
	CodeTopicNotFound    = "TopicNotFound"    // 404: no such Topic resource, or no such topic through the Cluster named
	CodeNotFound         = "NotFound"         // 404: not a gateway path
	CodeMethodNotAllowed = "MethodNotAllowed" // 405: only POST sends
	CodeMessageTooLarge  = "MessageTooLarge"  // 413: body over 4 MiB
	CodeTooManyRequests  = "TooManyRequests"  // 429: too many token and access reviews from this client, or new topics at once
	CodeInternal         = "Internal"         // 500: handling the request failed (a bug, logged); its connection closes
	CodeSendFailed       = "SendFailed"       // 503: every attempt failed
	CodeNoRoute          = "NoRoute"          // 503: the topic has no writable queue (no ready broker yet)
	// CodeBrokerRefusedCredentials (502): a broker refused detour's own RocketMQ credentials
	// (authentication or authorization), not the caller's request; the operator must fix them.
	CodeBrokerRefusedCredentials = "BrokerRefusedCredentials"
	CodeUnavailable              = "Unavailable" // 503: shutting down, or authorisation, the Topic or the Cluster's name servers could not be asked
)

// SendResponse is the 200 answer: where the message was stored and what it took.
type SendResponse struct {
	// MsgID is the message's UNIQ_KEY (RocketMQ's client message id).
	MsgID string `json:"msgId"`
	// OffsetMsgID is the broker's id of the stored message.
	OffsetMsgID string `json:"offsetMsgId,omitempty"`
	// Topic is the RocketMQ topic (the Topic resource's spec.topicName).
	Topic       string `json:"topic"`
	Broker      string `json:"broker"`
	QueueID     int    `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	// Attempts counts the attempts made; BrokersTried names the broker of each, in order.
	Attempts     int      `json:"attempts"`
	BrokersTried []string `json:"brokersTried"`
	// Status is SEND_OK or one of RocketMQ's "stored but" statuses.
	Status        string `json:"status"`
	LatencyMillis int64  `json:"latencyMillis"`
}

// ErrorResponse is the body of every answer other than 200.
type ErrorResponse struct {
	Code  string `json:"code"`
	Error string `json:"error"`
	// Attempts and BrokersTried are set when sending was tried.
	Attempts     int      `json:"attempts,omitempty"`
	BrokersTried []string `json:"brokersTried,omitempty"`
}

// Handler returns the gateway's HTTP handler (also usable without Start, e.g. in tests).
func (s *Server) Handler() http.Handler {
	notFound := func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, ErrorResponse{Code: CodeNotFound,
			Error: "not found; send with POST " + MessagesPath})
	}
	mux := http.NewServeMux()
	mux.HandleFunc(MessagesPath, s.serveMessages)
	mux.HandleFunc(BatchPath, s.serveBatch)
	if s.opts.Clusters != nil {
		mux.HandleFunc(ClusterMessagesPath, s.serveMessages)
		mux.HandleFunc(ClusterBatchPath, s.serveBatch)
	}
	mux.HandleFunc("/", notFound)
	return s.instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// ServeMux answers a path with "..", "." or "//" with a redirect and no body; the gateway
		// promises a JSON body on every answer but 200, and a sender has no business with such
		// a path anyway.
		if p := r.URL.Path; p != "/" && path.Clean(p) != p {
			notFound(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

// instrument counts requests in flight and records each answer's status and duration, closes
// the connection after each answer once the gateway retires, and answers a request whose
// handling panicked (see recoverHandler).
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inFlight.Add(1)
		s.metrics.InFlight().Inc()
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			series := s.metrics.Series(rec.status)
			series.Requests.Inc()
			series.Duration.Observe(time.Since(start).Seconds())
			s.metrics.InFlight().Dec()
			s.inFlight.Add(-1)
		}()
		defer s.recoverHandler(rec, r)
		if s.retiring.Load() {
			// net/http closes an HTTP/1.1 connection after this answer and sends an HTTP/2
			// GOAWAY; the header itself never reaches an HTTP/2 client.
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(rec, r)
	})
}

// recoverHandler, deferred around a request's handling, turns a panic into a 500 Internal answer
// on a connection that then closes, counted and logged with its stack. net/http would recover
// it too, but answer nothing, log outside the manager's log and leave the request counted as a
// 200. A panic after part of the answer went out cuts the connection instead, the only way to
// tell the caller the answer is incomplete.
func (s *Server) recoverHandler(rec *statusRecorder, r *http.Request) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler { //nolint:errorlint // net/http compares it so too
		panic(p) // a deliberate abort, which net/http handles quietly
	}
	s.metrics.Panicked(metrics.PanicInHandler)
	s.log.Error(fmt.Errorf("panic: %v", p), "Send gateway request handling panicked; closing its connection",
		"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "stack", string(debug.Stack()))
	if rec.wrote {
		panic(http.ErrAbortHandler)
	}
	rec.Header().Set("Connection", "close")
	writeError(rec, http.StatusInternalServerError, ErrorResponse{Code: CodeInternal,
		Error: "the gateway failed while handling this request (logged as its bug); whether the message was stored is unknown"})
}

// statusRecorder remembers the status of the answer and whether any of it was written.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status, r.wrote = code, true
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// admit answers a request that may not send (wrong method, a topic name RocketMQ refuses, an
// unknown or forbidden Topic or Cluster, a body announced over limit bytes) and returns false;
// otherwise it returns the request's Target, whose Route is set. Both paths, a Topic's and a
// Cluster's, are handled alike from here on.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, limit int64) (front.Target, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, ErrorResponse{Code: CodeMethodNotAllowed,
			Error: fmt.Sprintf("method %s not allowed; send with POST", r.Method)})
		return front.Target{}, false
	}
	a, ok := addresseeOf(w, r)
	if !ok || !s.authorize(w, r, a) {
		return front.Target{}, false
	}
	if r.ContentLength > limit {
		writeRequestError(w, tooLarge())
		return front.Target{}, false
	}
	target, err := s.resolve(r.Context(), a)
	if err != nil {
		s.writeResolveError(w, r, a, err)
		return front.Target{}, false
	}
	target.Route = target.RouteKey()
	return target, true
}

func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request) {
	asJSON := isJSON(r)
	limit := maxJSONRequest
	if !asJSON {
		limit = producer.MaxMessageSize
	}
	target, ok := s.admit(w, r, limit)
	if !ok {
		return
	}
	msg, how, err := readMessage(w, r, asJSON)
	if err != nil {
		writeReadError(w, err)
		return
	}
	msg.Topic = target.Topic
	// A caller sets data, never how RocketMQ treats the message: no reserved property at all, not
	// even the UNIQ_KEY and WAIT the runtime's Go callers may set.
	if err := producer.CheckUserProperties(msg.Properties); err != nil {
		s.writeSendError(w, r, err)
		return
	}
	begin := time.Now()
	res, err := s.send(r.Context(), target.Route, msg, how)
	s.countSent(target, 1, err, time.Since(begin))
	if err != nil {
		s.writeSendError(w, r, withBrokerNames(err, target.Brokers))
		return
	}
	res = withBrokerNames(res, target.Brokers)
	writeJSON(w, http.StatusOK, &SendResponse{
		MsgID:         res.MsgID,
		OffsetMsgID:   res.OffsetMsgID,
		Topic:         res.Topic,
		Broker:        res.Broker,
		QueueID:       res.QueueID,
		QueueOffset:   res.QueueOffset,
		Attempts:      res.Attempts,
		BrokersTried:  res.BrokersTried,
		Status:        res.Status,
		LatencyMillis: res.Latency.Milliseconds(),
	})
}

// countSent counts what the runtime did with n messages sent as one, by the brokers' Cluster: a
// send either stores all of them or none.
func (s *Server) countSent(target front.Target, n int, err error, took time.Duration) {
	if err != nil {
		s.metrics.Door(target.Brokers).Sent(0, n, took)
		return
	}
	s.metrics.Door(target.Brokers).Sent(n, 0, took)
}

// send sends msg by route as how asks: to its group's queue, for later, or plainly.
func (s *Server) send(ctx context.Context, route string, msg *producer.Message, how delivery) (*producer.SendResult, error) {
	at, err := how.deliverAt(time.Now())
	if err != nil {
		return nil, err
	}
	return s.opts.Sender.SendRouteAs(ctx, route, msg, producer.Delivery{Group: how.group, At: at})
}

// withBrokerNames returns what the runtime answered (a *producer.SendResult, a
// *producer.BatchResult or a send's error) with the brokers it names as RocketMQ names them,
// without the scope the runtime names them in: the one place the gateway renames brokers. Other
// values, and every value under the zero scope, come back as they are.
func withBrokerNames[T any](v T, brokers scope.Scope) T {
	if brokers == (scope.Scope{}) {
		return v
	}
	var out any
	switch e := any(v).(type) {
	case *producer.SendResult:
		named := *e
		named.Broker = brokers.Name(e.Broker)
		named.BrokersTried = brokers.Names(e.BrokersTried)
		out = &named
	case *producer.BatchResult:
		named := *e
		named.Broker = brokers.Name(e.Broker)
		named.BrokersTried = brokers.Names(e.BrokersTried)
		out = &named
	case *producer.SendError:
		named := *e
		named.BrokersTried = brokers.Names(e.BrokersTried)
		out = &named
	case *producer.OrderedSendError:
		named := *e
		named.Broker = brokers.Name(e.Broker)
		named.Err = withBrokerNames(e.Err, brokers)
		out = &named
	default:
		return v
	}
	return out.(T)
}

// authorize answers 401, 403, 429 or 503 and returns false unless the request may send to a.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, a addressee) bool {
	if s.opts.Authorizer == nil {
		return true
	}
	decision, reason, err := a.authorizeWith(kubeauth.WithClient(r.Context(), kubeauth.ClientOf(r)), s.opts.Authorizer, kubeauth.BearerToken(r))
	if errors.Is(err, kubeauth.ErrTooManyReviews) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, ErrorResponse{Code: CodeTooManyRequests, Error: err.Error() + "; retry later"})
		return false
	}
	if err != nil {
		s.log.Error(err, "Authorizing a send gateway request failed", append(a.logValues(), kubeauth.PanicStack(err)...)...)
		writeError(w, http.StatusServiceUnavailable, ErrorResponse{Code: CodeUnavailable,
			Error: kubeauth.ErrUnavailable.Error() + "; retry"})
		return false
	}
	switch decision {
	case kubeauth.Allowed:
		return true
	case kubeauth.Unauthenticated:
		w.Header().Set("WWW-Authenticate", `Bearer realm="detour"`)
		writeError(w, http.StatusUnauthorized, ErrorResponse{Code: CodeUnauthorized, Error: reason})
	default:
		writeError(w, http.StatusForbidden, ErrorResponse{Code: CodeForbidden, Error: reason})
	}
	return false
}

func (s *Server) writeSendError(w http.ResponseWriter, r *http.Request, err error) {
	if re, ok := errors.AsType[*requestError](err); ok {
		writeRequestError(w, re)
		return
	}
	if errors.Is(err, producer.ErrTimedDeliveryUnsupported) {
		writeError(w, http.StatusBadRequest, ErrorResponse{Code: CodeInvalidMessage, Error: err.Error()})
		return
	}
	if ve, ok := errors.AsType[*producer.ValidationError](err); ok {
		if errors.Is(err, producer.ErrBodyTooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, ErrorResponse{Code: CodeMessageTooLarge, Error: ve.Error()})
			return
		}
		writeError(w, http.StatusBadRequest, ErrorResponse{Code: CodeInvalidMessage, Error: ve.Error()})
		return
	}
	if errors.Is(err, producer.ErrNoRoute) {
		writeError(w, http.StatusServiceUnavailable, ErrorResponse{Code: CodeNoRoute,
			Error: err.Error() + ": no ready broker serves this topic yet"})
		return
	}
	if errors.Is(err, producer.ErrClosed) {
		writeError(w, http.StatusServiceUnavailable, ErrorResponse{Code: CodeUnavailable, Error: err.Error()})
		return
	}
	if be, kind, ok := producer.CredentialRefusalOf(err); ok {
		// The broker refused who detour is, not the message, and no retry by the caller helps:
		// the credentials of the Cluster (or Topic) must change.
		body := ErrorResponse{Code: CodeBrokerRefusedCredentials, Error: fmt.Sprintf(
			"broker %s refused detour's own credentials (%s): %s; check the credentialsSecretRef of the topic's Cluster or Topic",
			be.Addr, kind, be.Remark)}
		if se, ok := errors.AsType[*producer.SendError](err); ok {
			body.Attempts, body.BrokersTried = se.Attempts, se.BrokersTried
		}
		writeError(w, http.StatusBadGateway, body)
		return
	}
	if se, ok := errors.AsType[*producer.SendError](err); ok && se.MessageRefused {
		// Every broker tried refused the message itself (MESSAGE_ILLEGAL: properties or body
		// they cannot store): retrying would fail the same way, so the caller's request is what
		// must change. A refusal beside brokers that never answered is no such proof (503 below).
		writeError(w, http.StatusBadRequest, ErrorResponse{Code: CodeInvalidMessage, Error: err.Error(),
			Attempts: se.Attempts, BrokersTried: se.BrokersTried})
		return
	}
	if se, ok := errors.AsType[*producer.SendError](err); ok {
		if r.Context().Err() != nil {
			// The caller went away; nobody reads the answer, and the broker is not to blame.
			s.log.V(1).Info("Send gateway caller left before the send completed", "topic", se.Topic)
		}
		// err, not se: an ordered send's error also says its group was not moved.
		writeError(w, http.StatusServiceUnavailable, ErrorResponse{Code: CodeSendFailed, Error: err.Error(),
			Attempts: se.Attempts, BrokersTried: se.BrokersTried})
		return
	}
	s.log.Error(err, "Send through the gateway failed unexpectedly")
	writeError(w, http.StatusInternalServerError, ErrorResponse{Code: CodeUnavailable, Error: err.Error()})
}

func topicNotFound(ns, name string) ErrorResponse {
	return ErrorResponse{Code: CodeTopicNotFound, Error: fmt.Sprintf("Topic %q not found in namespace %q", name, ns)}
}

// writeReadError answers a request whose body could not be read as messages: a *requestError
// with its own status and code, any other error as 400 InvalidMessage.
func writeReadError(w http.ResponseWriter, err error) {
	var re *requestError
	if errors.As(err, &re) {
		writeRequestError(w, re)
		return
	}
	writeError(w, http.StatusBadRequest, ErrorResponse{Code: CodeInvalidMessage, Error: err.Error()})
}

func writeRequestError(w http.ResponseWriter, e *requestError) {
	writeError(w, e.status, ErrorResponse{Code: e.code, Error: e.msg})
}

func writeError(w http.ResponseWriter, status int, body ErrorResponse) {
	writeJSON(w, status, body)
}

// Header values every JSON answer carries, shared: net/http only reads them.
var (
	jsonContentType = []string{"application/json"}
	noSniff         = []string{"nosniff"}
)

// jsonBuffers hold answers while they are encoded, so an answer costs no buffer of its own.
var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeJSON answers status with body as JSON, written at once (net/http sets the length of an
// answer that fits its buffer).
func writeJSON(w http.ResponseWriter, status int, body any) {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer func() {
		// A buffer grown by a large answer (a big batch's ids) is left to the collector.
		if buf.Cap() <= 64<<10 {
			buf.Reset()
			jsonBuffers.Put(buf)
		}
	}()
	if a, ok := body.(jsonAppender); ok {
		buf.Write(a.appendJSON(buf.AvailableBuffer()))
	} else {
		_ = json.NewEncoder(buf).Encode(body)
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = noSniff
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
