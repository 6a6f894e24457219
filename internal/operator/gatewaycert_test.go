package operator

import (
	"bytes"
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
)

// testPair is a self-signed certificate and key in PEM, and its DER.
func testPair(t *testing.T, host string) (crt, key, der []byte) {
	t.Helper()
	crt, key, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	return crt, key, pair.Certificate[0]
}

// mountSecret writes a pair the way the kubelet updates a Secret volume: the files are links into
// a data folder that is swapped in one rename.
func mountSecret(t *testing.T, dir string, crt, key []byte) {
	t.Helper()
	data := filepath.Join(dir, "..data-"+time.Now().Format("150405.000000000"))
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(data, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(data), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tls.crt", "tls.key"} {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// gatewayCertIn is a certificate source for dir with a self-signed fallback, and the fallback's
// DER.
func gatewayCertIn(t *testing.T, dir string) (*gatewayCert, []byte) {
	t.Helper()
	crt, key, der := testPair(t, "fallback")
	fallback, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	return newGatewayCert(dir, &fallback, logr.Discard()), der
}

func served(t *testing.T, g *gatewayCert) []byte {
	t.Helper()
	c, err := g.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Certificate[0]
}

// TestGatewayCertFollowsItsFolder: the self-signed certificate until a Secret appears, then the
// Secret's, then its replacement; a pair that does not load, or files that vanish, leave the last
// good certificate served.
func TestGatewayCertFollowsItsFolder(t *testing.T) {
	dir := t.TempDir()
	g, fbDER := gatewayCertIn(t, dir)
	aCrt, aKey, aDER := testPair(t, "first")
	bCrt, bKey, bDER := testPair(t, "second")

	steps := []struct {
		name   string
		change func()
		want   []byte
	}{
		{"nothing mounted serves the self-signed certificate", func() {}, fbDER},
		{"a Secret created after start is served", func() { mountSecret(t, dir, aCrt, aKey) }, aDER},
		{"a rotated Secret is served", func() { mountSecret(t, dir, bCrt, bKey) }, bDER},
		{"a mismatched pair keeps the last good one", func() { mountSecret(t, dir, aCrt, bKey) }, bDER},
		{"vanished files keep the last good one", func() {
			for _, f := range []string{"tls.crt", "tls.key"} {
				if err := os.Remove(filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
			}
		}, bDER},
	}
	for _, s := range steps {
		s.change()
		g.reload()
		if got := served(t, g); !bytes.Equal(got, s.want) {
			t.Fatalf("%s: served another certificate", s.name)
		}
	}
}

// TestGatewayCertPicksUpASecretWhileRunning: started with an empty folder, the running source
// serves a pair mounted later without being told.
func TestGatewayCertPicksUpASecretWhileRunning(t *testing.T) {
	dir := t.TempDir()
	g, _ := gatewayCertIn(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Start(ctx) }()
	defer func() { cancel(); <-done }()

	crt, key, der := testPair(t, "later")
	mountSecret(t, dir, crt, key)
	deadline := time.Now().Add(30 * time.Second)
	for !bytes.Equal(served(t, g), der) {
		if time.Now().After(deadline) {
			t.Fatal("the mounted certificate was not served within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
