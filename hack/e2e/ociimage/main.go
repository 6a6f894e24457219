// Command ociimage writes a container image as an OCI image-layout archive, the form containerd
// imports (`ctr images import`), from layers given as directories or as tar files. The end-to-end
// node has no registry and no image builder: every image it runs is assembled here from files this
// repository builds.
//
//	ociimage -o manager.tar -name detour.e2e/manager:dev -user 65532:65532 \
//	    -entrypoint '["/manager"]' -layer ./rootfs
//
// Layers are stored uncompressed, so a layer's digest is its diff ID and a large base layer (a
// Debian root with a Java runtime) is copied, never recompressed.
package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// OCI media types (image-spec v1.1).
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// blob is content stored under blobs/sha256 in the archive: in memory or in a file.
type blob struct {
	digest string // hex sha256
	size   int64
	data   []byte
	path   string
}

type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fsFlags := flag.NewFlagSet("ociimage", flag.ContinueOnError)
	out := fsFlags.String("o", "", "the archive to write")
	name := fsFlags.String("name", "", "the image reference, e.g. detour.e2e/manager:dev")
	entrypoint := fsFlags.String("entrypoint", "", "the entrypoint as a JSON array")
	user := fsFlags.String("user", "", "the user (uid:gid) the image runs as")
	workdir := fsFlags.String("workdir", "", "the working directory")
	var layers, env stringsFlag
	fsFlags.Var(&layers, "layer", "a layer: a directory or a tar file (repeatable, base first)")
	fsFlags.Var(&env, "env", "an environment variable K=V (repeatable)")
	if err := fsFlags.Parse(args); err != nil {
		return err
	}
	if *out == "" || *name == "" || len(layers) == 0 {
		return errors.New("-o, -name and at least one -layer are required")
	}
	var ep []string
	if *entrypoint != "" {
		if err := json.Unmarshal([]byte(*entrypoint), &ep); err != nil {
			return fmt.Errorf("-entrypoint is not a JSON array of strings: %w", err)
		}
	}
	tmp, err := os.MkdirTemp(filepath.Dir(*out), ".ociimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var layerBlobs []blob
	for i, l := range layers {
		b, err := layerBlob(l, filepath.Join(tmp, fmt.Sprintf("layer%d.tar", i)))
		if err != nil {
			return fmt.Errorf("layer %s: %w", l, err)
		}
		layerBlobs = append(layerBlobs, b)
	}
	config, err := configBlob(layerBlobs, ep, *user, *workdir, env)
	if err != nil {
		return err
	}
	manifest, err := manifestBlob(config, layerBlobs)
	if err != nil {
		return err
	}
	index, err := jsonBlob(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaIndex,
		"manifests": []any{map[string]any{
			"mediaType": mediaManifest,
			"digest":    "sha256:" + manifest.digest,
			"size":      manifest.size,
			"platform":  map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			"annotations": map[string]string{
				"io.containerd.image.name":          *name,
				"org.opencontainers.image.ref.name": tagOf(*name),
			},
		}},
	})
	if err != nil {
		return err
	}
	return writeArchive(*out, index, append([]blob{config, manifest}, layerBlobs...))
}

// tagOf is the tag of an image reference ("latest" without one).
func tagOf(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return "latest"
}

// layerBlob returns a layer from a tar file as it is, or from a directory tarred into scratch.
func layerBlob(src, scratch string) (blob, error) {
	st, err := os.Stat(src)
	if err != nil {
		return blob{}, err
	}
	path := src
	if st.IsDir() {
		if err := tarDir(src, scratch); err != nil {
			return blob{}, err
		}
		path = scratch
	}
	digest, size, err := hashFile(path)
	return blob{digest: digest, size: size, path: path}, err
}

// tarDir writes the tree under dir as a layer: paths relative to the root, owned by root, with
// the modes and symlinks on disk.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.ModTime = time.Unix(0, 0)
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

func jsonBlob(v any) (blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return blob{}, err
	}
	sum := sha256.Sum256(data)
	return blob{digest: hex.EncodeToString(sum[:]), size: int64(len(data)), data: data}, nil
}

func configBlob(layers []blob, entrypoint []string, user, workdir string, env []string) (blob, error) {
	diffIDs := make([]string, len(layers))
	for i, l := range layers {
		diffIDs[i] = "sha256:" + l.digest
	}
	cfg := map[string]any{"Env": append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...)}
	if len(entrypoint) > 0 {
		cfg["Entrypoint"] = entrypoint
	}
	if user != "" {
		cfg["User"] = user
	}
	if workdir != "" {
		cfg["WorkingDir"] = workdir
	}
	return jsonBlob(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       cfg,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
}

func manifestBlob(config blob, layers []blob) (blob, error) {
	descs := make([]any, len(layers))
	for i, l := range layers {
		descs[i] = map[string]any{"mediaType": mediaLayer, "digest": "sha256:" + l.digest, "size": l.size}
	}
	return jsonBlob(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        map[string]any{"mediaType": mediaConfig, "digest": "sha256:" + config.digest, "size": config.size},
		"layers":        descs,
	})
}

// writeArchive writes the image layout (oci-layout, index.json, blobs) as one tar, atomically.
func writeArchive(out string, index blob, blobs []blob) error {
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	add := func(name string, b blob) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: b.size, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if b.data != nil {
			_, err := tw.Write(b.data)
			return err
		}
		src, err := os.Open(b.path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	}
	layout, _ := jsonBlob(map[string]string{"imageLayoutVersion": "1.0.0"})
	err = add("oci-layout", layout)
	if err == nil {
		err = add("index.json", index)
	}
	for _, b := range blobs {
		if err == nil {
			err = add("blobs/sha256/"+b.digest, b)
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}
