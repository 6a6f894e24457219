package operator

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// certReloadInterval is how often the gateway's certificate folder is read. A Secret volume
// changes by an atomic swap of its files, so one read of both files is always a matching pair.
const certReloadInterval = time.Second

// gatewayCert serves the certificate in a folder (tls.crt and tls.key, as a kubernetes.io/tls
// Secret is mounted) whenever one is there, and a self-signed certificate until then. The folder
// is read again every certReloadInterval, so a Secret created after the replica started, or
// rotated, is served without a restart. A pair that does not load (half written, mismatched) is
// logged and the last good one stays; so does the last one when the files go away, since an
// optional Secret's files vanish when it is deleted and a replica should not fall back to an
// unverifiable certificate on its own.
type gatewayCert struct {
	dir      string
	fallback *tls.Certificate
	log      logr.Logger

	mu       sync.RWMutex
	current  *tls.Certificate
	crt, key []byte // the files current was loaded from
}

// newGatewayCert loads the folder once, so a replica that starts with the Secret present serves
// it from its first handshake.
func newGatewayCert(dir string, fallback *tls.Certificate, log logr.Logger) *gatewayCert {
	g := &gatewayCert{dir: dir, fallback: fallback, log: log}
	g.reload()
	return g
}

// GetCertificate is tls.Config.GetCertificate.
func (g *gatewayCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.current != nil {
		return g.current, nil
	}
	return g.fallback, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica serves the gateway.
func (*gatewayCert) NeedLeaderElection() bool { return false }

// Start reads the folder every certReloadInterval until ctx ends.
func (g *gatewayCert) Start(ctx context.Context) error {
	t := time.NewTicker(certReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			g.reload()
		}
	}
}

// reload installs the folder's pair when it differs from the one served.
func (g *gatewayCert) reload() {
	crt, key, err := g.read()
	if errors.Is(err, fs.ErrNotExist) {
		return // nothing there (yet, or any more): keep what is served
	}
	if err != nil {
		g.log.Error(err, "Reading the gateway certificate; serving the previous one", "dir", g.dir)
		return
	}
	g.mu.RLock()
	same := bytes.Equal(crt, g.crt) && bytes.Equal(key, g.key)
	g.mu.RUnlock()
	if same {
		return
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		g.log.Error(err, "The gateway certificate does not load; serving the previous one", "dir", g.dir)
		return
	}
	g.mu.Lock()
	g.current, g.crt, g.key = &pair, crt, key
	g.mu.Unlock()
	g.log.Info("Serving the gateway certificate from its folder", "dir", g.dir)
}

func (g *gatewayCert) read() (crt, key []byte, err error) {
	if crt, err = os.ReadFile(filepath.Join(g.dir, "tls.crt")); err != nil {
		return nil, nil, err
	}
	if key, err = os.ReadFile(filepath.Join(g.dir, "tls.key")); err != nil {
		return nil, nil, err
	}
	if len(crt) == 0 || len(key) == 0 {
		return nil, nil, fmt.Errorf("tls.crt or tls.key is empty")
	}
	return crt, key, nil
}
