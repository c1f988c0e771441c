// Command oracle answers, for a cluster snapshot, what kube-scheduler
// v1.37.2 would do with each pending pod: it runs the scheduler's own
// framework with the default profile (every in-tree filter, the
// DynamicResources plugin with the scheduler's DRA manager, ResourceSlice
// tracker and structured allocator) over the snapshot, placing pods one after
// another in dra-autoscaler's order and committing each pod's claims before
// the next. Its JSON has the shape of `dra-autoscaler simulate -o json`.
//
//	oracle [--kubernetes-version 1.37] [--feature-gates A=true,B=false] FILE|DIR...
//	oracle --serve     # one JSON request per stdin line, one answer per stdout line
//	oracle --defaults 1.36   # the DRA gate defaults of a version
//
// See docs/testing.md ("The upstream oracle") for how the differential test
// uses it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	goflag "flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// request is one line of --serve input.
type request struct {
	ID                string `json:"id"`
	KubernetesVersion string `json:"kubernetesVersion"`
	FeatureGates      string `json:"featureGates"`
	// Snapshot is the cluster as `simulate` reads it (YAML or JSON text).
	Snapshot string `json:"snapshot"`
	// Defaults asks for the DRA gate defaults of KubernetesVersion instead.
	Defaults bool `json:"defaults,omitempty"`
}

// answer is one line of --serve output (and the whole output otherwise).
type answer struct {
	ID       string          `json:"id,omitempty"`
	Gates    *gateSetup      `json:"gates,omitempty"`
	Pods     []podReport     `json:"pods"`
	Defaults map[string]bool `json:"defaults,omitempty"`
	// Error: the cluster could not be judged (unreadable, or gates that no
	// kube-scheduler 1.34-1.37 accepts). Not a pod outcome.
	Error string `json:"error,omitempty"`
}

func main() {
	version := goflag.String("kubernetes-version", "1.37", "the kube-scheduler minor to emulate (1.34 to 1.37)")
	gates := goflag.String("feature-gates", "", "Name=true,Other=false on top of the version's defaults")
	serve := goflag.Bool("serve", false, "read JSON requests from stdin, one per line, and answer each on stdout")
	defaults := goflag.String("defaults", "", "print the DRA gate defaults of this version and exit")
	verbosity := goflag.Int("v", 0, "kube-scheduler log verbosity on stderr (5 shows the allocator's decisions); 0 is silent")
	goflag.Parse()

	if *verbosity > 0 {
		klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
		klog.InitFlags(klogFlags)
		_ = klogFlags.Set("v", strconv.Itoa(*verbosity))
		_ = klogFlags.Set("logtostderr", "true")
	} else {
		// The scheduler's logs would drown the answers; reasons carry what matters.
		klog.SetLogger(logr.Discard())
	}
	metrics.Register()

	switch {
	case *defaults != "":
		emit(os.Stdout, handle(request{KubernetesVersion: *defaults, Defaults: true}), true)
	case *serve:
		if err := serveLoop(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(1)
		}
	default:
		if goflag.NArg() == 0 {
			fmt.Fprintln(os.Stderr, "usage: oracle [--kubernetes-version 1.N] [--feature-gates ...] FILE|DIR... | --serve | --defaults 1.N")
			os.Exit(2)
		}
		data, err := readPaths(goflag.Args())
		if err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(1)
		}
		a := handle(request{KubernetesVersion: *version, FeatureGates: *gates, Snapshot: string(data)})
		emit(os.Stdout, a, true)
		if a.Error != "" {
			fmt.Fprintln(os.Stderr, "oracle:", a.Error)
			os.Exit(1)
		}
	}
}

func serveLoop(in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 256<<20)
	w := bufio.NewWriter(out)
	for scanner.Scan() {
		line := scanner.Bytes()
		if len(line) == 0 {
			continue
		}
		var req request
		var a answer
		if err := json.Unmarshal(line, &req); err != nil {
			a = answer{Error: "bad request: " + err.Error(), Pods: []podReport{}}
		} else {
			a = handle(req)
		}
		emit(w, a, false)
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return scanner.Err()
}

func emit(w io.Writer, a answer, pretty bool) {
	var data []byte
	var err error
	if pretty {
		data, err = json.MarshalIndent(a, "", "  ")
	} else {
		data, err = json.Marshal(a)
	}
	if err != nil {
		data = []byte(fmt.Sprintf(`{"id":%q,"pods":[],"error":%q}`, a.ID, "encoding the answer: "+err.Error()))
	}
	_, _ = w.Write(append(data, '\n'))
}

// handle judges one request; a panic in the scheduler code becomes an error
// answer so one strange cluster never ends a batch.
func handle(req request) (a answer) {
	a = answer{ID: req.ID, Pods: []podReport{}}
	defer func() {
		if r := recover(); r != nil {
			a.Pods = []podReport{}
			a.Error = fmt.Sprintf("oracle panic: %v", r)
		}
	}()
	if req.KubernetesVersion == "" {
		req.KubernetesVersion = "1.37"
	}
	if req.Defaults {
		d, err := defaultGates(req.KubernetesVersion)
		if err != nil {
			a.Error = err.Error()
		}
		a.Defaults = d
		return a
	}
	setup, err := configureGates(req.KubernetesVersion, req.FeatureGates)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	a.Gates = setup
	c, err := parseCluster([]byte(req.Snapshot))
	if err != nil {
		a.Error = err.Error()
		return a
	}
	c.normalize()
	pods, err := judge(context.Background(), c)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	a.Pods = pods
	return a
}
