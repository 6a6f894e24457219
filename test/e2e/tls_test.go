//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestGatewayServesARotatedCertificate: creating the detour-gateway-tls Secret, then replacing its
// certificate, changes what the gateway serves on every replica, with no container restarted.
func TestGatewayServesARotatedCertificate(t *testing.T) {
	k := deploy(t)
	before := k.managerRestarts(t)
	for round, serial := range []int64{1001, 1002} {
		certPEM, keyPEM, der := selfSigned(t, serial)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "detour-gateway-tls", Namespace: operatorNamespace},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}
		secrets := k.cs.CoreV1().Secrets(operatorNamespace)
		_, err := secrets.Create(context.Background(), secret, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = secrets.Update(context.Background(), secret, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// Every replica behind the Service: several handshakes in a row, each on a new connection.
		eventually(t, 3*time.Minute, fmt.Sprintf("the gateway serves certificate %d", serial), func() error {
			for range 8 {
				got, err := k.servedCertificate()
				if err != nil {
					return err
				}
				if !bytes.Equal(got, der) {
					return fmt.Errorf("still another certificate")
				}
			}
			return nil
		})
		t.Logf("round %d: certificate %d served %v after the Secret changed", round+1, serial, time.Since(start).Round(100*time.Millisecond))
	}
	if after := k.managerRestarts(t); after != before {
		t.Errorf("manager containers restarted: %s, was %s", after, before)
	}
}

// servedCertificate is the leaf certificate the gateway Service presents on a new connection.
func (k *cluster) servedCertificate() ([]byte, error) {
	host := strings.TrimPrefix(k.gateway, "https://")
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", host, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

// managerRestarts names each manager pod with its container restarts, to see that none restarted.
func (k *cluster) managerRestarts(t *testing.T) string {
	t.Helper()
	var parts []string
	for _, p := range k.managerPods(t) {
		n := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
		}
		parts = append(parts, fmt.Sprintf("%s:%d", p.Name, n))
	}
	return strings.Join(parts, ",")
}

// selfSigned makes a certificate for the gateway Service's names and returns it and its key in
// PEM, and the certificate's DER.
func selfSigned(t *testing.T, serial int64) (certPEM, keyPEM, der []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "detour-gateway.detour-system.svc"},
		DNSNames:     []string{"detour-gateway.detour-system.svc", "detour-gateway.detour-system.svc.cluster.local"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), der
}
