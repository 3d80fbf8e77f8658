package hub

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"testing"

	"k8s.io/klog/v2"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
)

// managerFlags registers the flags of cmd/manager on a new FlagSet, as main does: the
// manager's (Options.AddFlags), klog's and controller-runtime's --kubeconfig. A flag
// registered twice makes it fail the test.
func managerFlags(t *testing.T, opts *Options) (fs *flag.FlagSet, parsed func()) {
	t.Helper()
	fs = flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("a flag is registered twice: %v", r)
		}
	}()
	parsed = opts.AddFlags(fs)
	klog.InitFlags(fs)
	ctrlconfig.RegisterFlags(fs)
	return fs, parsed
}

// TestFlagsRegisteredOnce: no two of the manager's flags, the controllers' included, nor
// one of them and a flag of klog or controller-runtime, share a name (the flag package
// panics on the second).
func TestFlagsRegisteredOnce(t *testing.T) {
	opts := DefaultOptions()
	fs, _ := managerFlags(t, &opts)
	if fs.Lookup("concurrency") == nil || fs.Lookup("report-budget-bytes") == nil || fs.Lookup("agent-image") == nil {
		t.Fatal("the manager's flags lack those of the manager or of its controllers")
	}
}

// TestFlagDefaultsAreTheDefaultOptions: a command line without flags gives
// DefaultOptions, and so does one that sets every flag to the default its help shows,
// so that the defaults shown are the defaults used.
func TestFlagDefaultsAreTheDefaultOptions(t *testing.T) {
	want := DefaultOptions()
	opts := DefaultOptions()
	fs, parsed := managerFlags(t, &opts)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	parsed()
	if !reflect.DeepEqual(opts, want) {
		t.Errorf("no flags give\n%+v\nwant DefaultOptions\n%+v", opts, want)
	}

	opts = DefaultOptions()
	fs, parsed = managerFlags(t, &opts)
	// The manager's own flags, not klog's, whose settings are global.
	own := flag.NewFlagSet("own", flag.ContinueOnError)
	scratch := DefaultOptions()
	scratch.AddFlags(own)
	var args []string
	own.VisitAll(func(f *flag.Flag) { args = append(args, fmt.Sprintf("--%s=%s", f.Name, fs.Lookup(f.Name).DefValue)) })
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	parsed()
	if !reflect.DeepEqual(opts, want) {
		t.Errorf("the flags at the defaults they show, %v, give\n%+v\nwant DefaultOptions\n%+v", args, opts, want)
	}
}
