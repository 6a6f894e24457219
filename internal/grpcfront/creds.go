package grpcfront

import (
	"context"
	"errors"
	"io"
	"net"

	"google.golang.org/grpc/credentials"
)

// tlsRecordHandshake is the first byte of every TLS connection (a handshake record holding the
// ClientHello); an HTTP/2 connection in the clear starts with "PRI * HTTP/2.0".
const tlsRecordHandshake = 0x16

// errPlaintextRefused is the handshake error of a connection in the clear to an endpoint that
// serves TLS only.
var errPlaintextRefused = errors.New("this endpoint serves TLS only: the client connected without TLS")

// errTLSUnconfigured is the handshake error of a TLS connection to an endpoint given no
// certificate.
var errTLSUnconfigured = errors.New("this endpoint has no certificate: the client must connect without TLS")

// sniffingCreds serves TLS and, when allowed, plaintext on one port: it reads the connection's
// first byte and hands the connection to TLS when that byte starts a TLS record. gRPC bounds the
// handshake, this read included, by its connection timeout, so a silent peer costs one goroutine
// for that long at most.
type sniffingCreds struct {
	tls        credentials.TransportCredentials // nil: no certificate, plaintext only
	allowPlain bool
}

// ServerHandshake implements credentials.TransportCredentials.
func (c *sniffingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	var first [1]byte
	if _, err := io.ReadFull(raw, first[:]); err != nil {
		return nil, nil, err
	}
	conn := &replayConn{Conn: raw, first: first[0], pending: true}
	if first[0] == tlsRecordHandshake {
		if c.tls == nil {
			return nil, nil, errTLSUnconfigured
		}
		return c.tls.ServerHandshake(conn)
	}
	if !c.allowPlain {
		return nil, nil, errPlaintextRefused
	}
	return conn, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

// ClientHandshake implements credentials.TransportCredentials; the endpoint never dials.
func (c *sniffingCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("the RocketMQ endpoint's credentials serve, they do not dial")
}

// Info implements credentials.TransportCredentials.
func (c *sniffingCreds) Info() credentials.ProtocolInfo {
	if c.tls != nil {
		return c.tls.Info()
	}
	return credentials.ProtocolInfo{SecurityProtocol: "insecure"}
}

// Clone implements credentials.TransportCredentials.
func (c *sniffingCreds) Clone() credentials.TransportCredentials {
	out := *c
	if c.tls != nil {
		out.tls = c.tls.Clone()
	}
	return &out
}

// OverrideServerName implements credentials.TransportCredentials (deprecated there; unused).
func (c *sniffingCreds) OverrideServerName(string) error { return nil }

// plainInfo is the AuthInfo of a connection in the clear.
type plainInfo struct{ credentials.CommonAuthInfo }

// AuthType implements credentials.AuthInfo.
func (plainInfo) AuthType() string { return "insecure" }

// replayConn gives back the byte the handshake read before the rest of the connection.
type replayConn struct {
	net.Conn
	first   byte
	pending bool
}

// Read returns the sniffed byte first.
func (c *replayConn) Read(p []byte) (int, error) {
	if c.pending && len(p) > 0 {
		p[0] = c.first
		c.pending = false
		return 1, nil // a short read; the rest follows with the next ones
	}
	return c.Conn.Read(p)
}
