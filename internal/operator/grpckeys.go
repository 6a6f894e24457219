package operator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/detourmq/detour/internal/grpcfront"
)

// topicsSuffix ends the key of an access key's topics in the access keys Secret.
const topicsSuffix = ".topics"

// secretAccessKeys are the gRPC endpoint's access keys, held in one Secret: each data key
// <accessKey> holds that key's secret, and <accessKey>.topics the comma-separated RocketMQ topics
// it may send to, or * for all; a key without topics may only authenticate. As the credentials
// of Clusters are read, the manager watches the Secret's metadata only and reads its data again
// when its resourceVersion changes, so a rotated key is in use at the next call.
type secretAccessKeys struct {
	key  types.NamespacedName
	meta client.Reader // the manager's cache, metadata only
	api  client.Reader // the API server
	log  logr.Logger

	mu      sync.Mutex
	read    bool   // the Secret was looked up once
	version string // of the Secret read; "" while it is missing
	keys    grpcfront.StaticAccessKeys
}

// LookupAccessKey implements grpcfront.AccessKeys. While the Secret is missing no key is known,
// so every call is refused UNAUTHORIZED: the endpoint was told to check signatures.
func (s *secretAccessKeys) LookupAccessKey(ctx context.Context, id string) (grpcfront.AccessKey, bool, error) {
	keys, err := s.current(ctx)
	if err != nil {
		return grpcfront.AccessKey{}, false, err
	}
	return keys.LookupAccessKey(ctx, id)
}

// current is the keys of the Secret as it is now.
func (s *secretAccessKeys) current(ctx context.Context) (grpcfront.StaticAccessKeys, error) {
	var pm metav1.PartialObjectMetadata
	pm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := s.meta.Get(ctx, s.key, &pm)
	if apierrors.IsNotFound(err) {
		return s.remember("", nil), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s: %w", s.key, err)
	}
	s.mu.Lock()
	read, version, keys := s.read, s.version, s.keys
	s.mu.Unlock()
	if read && version == pm.ResourceVersion {
		return keys, nil
	}
	var secret corev1.Secret
	if err := s.api.Get(ctx, s.key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return s.remember("", nil), nil
		}
		return nil, fmt.Errorf("reading Secret %s: %w", s.key, err)
	}
	keys, err = accessKeysOf(&secret)
	if err != nil {
		s.log.Info("Some entries of the gRPC endpoint's access keys Secret are unusable and ignored", "secret", s.key.String(), "error", err.Error())
	}
	return s.remember(secret.ResourceVersion, keys), nil
}

// remember keeps what was read of the Secret (version "" while it is missing), logging when
// that changed rather than at every call.
func (s *secretAccessKeys) remember(version string, keys grpcfront.StaticAccessKeys) grpcfront.StaticAccessKeys {
	s.mu.Lock()
	changed := !s.read || version != s.version
	s.read, s.version, s.keys = true, version, keys
	s.mu.Unlock()
	switch {
	case !changed:
	case version == "":
		s.log.Info("The gRPC endpoint's access keys Secret does not exist; every call is refused until it does", "secret", s.key.String())
	default:
		s.log.Info("The gRPC endpoint's access keys are read", "secret", s.key.String(), "resourceVersion", version, "keys", len(keys))
	}
	return keys
}

// accessKeysOf reads an access keys Secret. Entries with an empty secret are left out (anyone
// could sign for them) and named in the error, which does not stop the other keys from serving.
func accessKeysOf(s *corev1.Secret) (grpcfront.StaticAccessKeys, error) {
	keys := grpcfront.StaticAccessKeys{}
	var empty []string
	for name, value := range s.Data {
		if strings.HasSuffix(name, topicsSuffix) {
			continue
		}
		if len(value) == 0 {
			empty = append(empty, name)
			continue
		}
		keys[name] = grpcfront.AccessKey{Secret: string(value), Topics: topicList(string(s.Data[name+topicsSuffix]))}
	}
	if len(empty) > 0 {
		sort.Strings(empty)
		return keys, fmt.Errorf("access keys %s have an empty secret", strings.Join(empty, ", "))
	}
	return keys, nil
}

// topicList is a comma-separated list of topics without blanks.
func topicList(v string) []string {
	var out []string
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// parseSecretRef reads a namespace/name reference.
//
//docgen:not-identity a Secret's namespace/name as a flag gives it
func parseSecretRef(ref string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, errors.New("must be namespace/name")
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
