package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readArchive returns every file of a tar by name.
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = b
	}
}

func blobOf(t *testing.T, files map[string][]byte, digest string) []byte {
	t.Helper()
	hexd, ok := strings.CutPrefix(digest, "sha256:")
	b, found := files["blobs/sha256/"+hexd]
	if !ok || !found {
		t.Fatalf("no blob %s", digest)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexd {
		t.Fatalf("blob %s holds content of another digest", digest)
	}
	return b
}

// TestArchiveIsAnImageLayoutContainerdCanName: the archive holds an OCI layout whose index names
// the image (the annotation containerd imports it by), whose manifest and config point at blobs
// with matching digests, and whose layers hold the files given, base layer first.
func TestArchiveIsAnImageLayoutContainerdCanName(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "app"), []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("app", filepath.Join(root, "etc", "link")); err != nil {
		t.Fatal(err)
	}
	// A base layer given as a tar file, as the Java root is.
	base := filepath.Join(dir, "base.tar")
	if err := tarDir(root, base); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	err := run([]string{"-o", out, "-name", "detour.e2e/app:dev", "-user", "65532:65532",
		"-entrypoint", `["/app"]`, "-env", "A=b", "-layer", base, "-layer", root})
	if err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, out)
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout %q", files["oci-layout"])
	}
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", files["index.json"], err)
	}
	if got := index.Manifests[0].Annotations["io.containerd.image.name"]; got != "detour.e2e/app:dev" {
		t.Errorf("image name %q", got)
	}
	var manifest struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(blobOf(t, files, index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Config struct {
			Entrypoint []string
			User       string
			Env        []string
		}
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blobOf(t, files, manifest.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	if config.Config.User != "65532:65532" || len(config.Config.Entrypoint) != 1 || config.Config.Entrypoint[0] != "/app" {
		t.Errorf("config %+v", config.Config)
	}
	if len(manifest.Layers) != 2 || len(config.RootFS.DiffIDs) != 2 {
		t.Fatalf("%d layers, %d diff ids, want 2", len(manifest.Layers), len(config.RootFS.DiffIDs))
	}
	for i, l := range manifest.Layers {
		if l.Digest != config.RootFS.DiffIDs[i] {
			t.Errorf("layer %d: digest %s, diff id %s (uncompressed layers must match)", i, l.Digest, config.RootFS.DiffIDs[i])
		}
		layer := blobOf(t, files, l.Digest)
		tr := tar.NewReader(strings.NewReader(string(layer)))
		seen := map[string]string{}
		for {
			hdr, err := tr.Next()
			if err != nil {
				break
			}
			seen[hdr.Name] = hdr.Linkname
			if hdr.Uid != 0 || hdr.Gid != 0 {
				t.Errorf("layer %d: %s owned by %d:%d, want root", i, hdr.Name, hdr.Uid, hdr.Gid)
			}
		}
		if _, ok := seen["app"]; !ok {
			t.Errorf("layer %d lacks app: %v", i, seen)
		}
		if seen["etc/link"] != "app" {
			t.Errorf("layer %d: etc/link -> %q, want app", i, seen["etc/link"])
		}
	}
}

// TestBadUsageIsRefused: a missing output, name or layer, and an entrypoint that is not a JSON
// array, are errors.
func TestBadUsageIsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-name", "x:1", "-layer", dir},
		{"-o", filepath.Join(dir, "o.tar"), "-layer", dir},
		{"-o", filepath.Join(dir, "o.tar"), "-name", "x:1"},
		{"-o", filepath.Join(dir, "o.tar"), "-name", "x:1", "-layer", dir, "-entrypoint", "/app"},
	} {
		if err := run(args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
