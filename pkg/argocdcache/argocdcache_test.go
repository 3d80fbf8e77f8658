package argocdcache

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"testing"
)

func TestKeys(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{InstanceName("argocd", "argocd", "web"), "web"},
		{InstanceName("argocd", "", "web"), "web"},
		{InstanceName("argocd", "team-a", "web"), "team-a_web"},
		{TreeKey("web", 0), "app|resources-tree|web|1.8.3"},
		{TreeKey("team-a_web", 2), "app|resources-tree|team-a_web|2|1.8.3"},
		{ManagedResourcesKey("web"), "app|managed-resources|web|1.8.3"},
		{StoredKey(TreeKey("web", 0), CompressionGzip), "app|resources-tree|web|1.8.3.gz"},
		{StoredKey(TreeKey("web", 0), CompressionNone), "app|resources-tree|web|1.8.3"},
		{InstanceOfTreeNotification(ManagedResourcesKey("team-a_web")), "team-a_web"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if ns, name := AppOfInstanceName("argocd", "team-a_web"); ns != "team-a" || name != "web" {
		t.Errorf("AppOfInstanceName: %s/%s", ns, name)
	}
	if ns, name := AppOfInstanceName("argocd", "web"); ns != "argocd" || name != "web" {
		t.Errorf("AppOfInstanceName: %s/%s", ns, name)
	}
}

// TestEncode checks that a value is stored as Argo CD's redisCache stores it: the JSON of
// json.Encoder (with its newline), gzip-compressed by default, and that Decode reads it
// back.
func TestEncode(t *testing.T) {
	tree := Tree{Nodes: []Node{{
		Ref:        Ref{Version: "v1", Kind: "Pod", Namespace: "web", Name: "web-1"},
		ParentRefs: []Ref{{Group: "apps", Kind: "ReplicaSet", Namespace: "web", Name: "web-5d9c"}},
		Images:     []string{"nginx:1"},
		Health:     &Health{Status: "Healthy"},
	}}}
	const wantJSON = `{"nodes":[{"version":"v1","kind":"Pod","namespace":"web","name":"web-1",` +
		`"parentRefs":[{"group":"apps","kind":"ReplicaSet","namespace":"web","name":"web-5d9c"}],"images":["nginx:1"],"health":{"status":"Healthy"}}]}` + "\n"

	plain, err := Encode(tree, CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	if string(plain) != wantJSON {
		t.Errorf("uncompressed:\n got %s\nwant %s", plain, wantJSON)
	}
	compressed, err := Encode(tree, CompressionGzip)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		t.Fatal(err)
	}
	inflated, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	if string(inflated) != wantJSON {
		t.Errorf("gzip:\n got %s\nwant %s", inflated, wantJSON)
	}
	for _, c := range []struct {
		raw        []byte
		compressed bool
	}{{plain, false}, {compressed, true}} {
		var back Tree
		if err := Decode(c.raw, c.compressed, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, tree) {
			t.Errorf("round trip (compressed %v): %+v", c.compressed, back)
		}
	}
	if err := Decode(plain, true, &Tree{}); err == nil {
		t.Error("plain JSON decoded as gzip")
	}

	diffs, err := Encode([]ResourceDiff{{Group: "apps", Kind: "Deployment", Namespace: "web", Name: "web", LiveState: "null", TargetState: "null", Modified: true}}, CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"group":"apps","kind":"Deployment","namespace":"web","name":"web","targetState":"null","liveState":"null","modified":true}]` + "\n"; string(diffs) != want {
		t.Errorf("managed resources:\n got %s\nwant %s", diffs, want)
	}
}

func TestParseCompression(t *testing.T) {
	for _, s := range []string{"gzip", "none"} {
		if c, err := ParseCompression(s); err != nil || string(c) != s {
			t.Errorf("%s: %v %v", s, c, err)
		}
	}
	if _, err := ParseCompression("zstd"); err == nil {
		t.Error("zstd accepted")
	}
}

// BenchmarkCompress compresses an app's tree of 20 resources, 3 children each, as the
// hub's resource tree writer does for every changed app.
func BenchmarkCompress(b *testing.B) {
	var tree Tree
	for i := range 80 {
		tree.Nodes = append(tree.Nodes, Node{Ref: Ref{Group: "apps", Version: "v1", Kind: "Deployment",
			Namespace: "web", Name: fmt.Sprintf("web-%d", i), UID: fmt.Sprintf("4d1c5e9e-1f0b-5a47-9c5e-%012d", i)}})
	}
	encoded, err := Encode(tree, CompressionNone)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(encoded)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compress(encoded, CompressionGzip); err != nil {
			b.Fatal(err)
		}
	}
}

// bomb is a gzip value that expands to size bytes: a JSON tree whose nodes array is
// padded with whitespace, which compresses about a thousand to one.
func bomb(t *testing.T, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gz.Write([]byte(`{"nodes":[`)); err != nil {
		t.Fatal(err)
	}
	pad := bytes.Repeat([]byte(" "), 1<<20)
	for written := 0; written < size; written += len(pad) {
		if _, err := gz.Write(pad); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gz.Write([]byte("]}\n")); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDecodeBoundsAGzipBomb: a value that expands past the bound is refused with
// ErrValueTooLarge, having decompressed little more than the bound; one within it decodes.
func TestDecodeBoundsAGzipBomb(t *testing.T) {
	raw := bomb(t, 256<<20)
	t.Logf("a %d-byte gzip value that expands to 256 MiB", len(raw))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := DecodeBounded(raw, true, MaxValueBytes, &Tree{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("DecodeBounded: %v, want ErrValueTooLarge", err)
	}
	if n > MaxValueBytes+1 {
		t.Errorf("decompressed %d bytes, past the bound %d", n, MaxValueBytes)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 8*MaxValueBytes {
		t.Errorf("allocated %d MiB to refuse it", allocated>>20)
	}
	if err := Decode(raw, true, &Tree{}); !errors.Is(err, ErrValueTooLarge) {
		t.Errorf("Decode: %v, want ErrValueTooLarge", err)
	}

	small := bomb(t, 1<<20)
	n, err = DecodeBounded(small, true, MaxValueBytes, &Tree{})
	if err != nil || n < 1<<20 {
		t.Errorf("a 1 MiB tree: %d bytes, %v", n, err)
	}
	if _, err := DecodeBounded(small, true, 1<<19, &Tree{}); !errors.Is(err, ErrValueTooLarge) {
		t.Errorf("a 1 MiB tree with a 512 KiB bound: %v, want ErrValueTooLarge", err)
	}
	plain := []byte(`{"nodes":[]}` + "\n")
	if _, err := DecodeBounded(plain, false, int64(len(plain)), &Tree{}); err != nil {
		t.Errorf("a value of exactly the bound: %v", err)
	}
	if _, err := DecodeBounded(plain, false, int64(len(plain))-2, &Tree{}); !errors.Is(err, ErrValueTooLarge) {
		t.Errorf("an uncompressed value over the bound: %v, want ErrValueTooLarge", err)
	}
}
