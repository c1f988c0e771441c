package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubernetes/pkg/api/legacyscheme"

	// The API server's defaulting of the objects a snapshot may omit
	// fields of (allocationMode, count, toleration operators, ...).
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
)

// cluster is a snapshot as typed objects, after the API server's defaulting.
type cluster struct {
	Nodes            []*v1.Node
	Pods             []*v1.Pod
	Namespaces       []*v1.Namespace
	Claims           []*resourceapi.ResourceClaim
	Templates        []*resourceapi.ResourceClaimTemplate
	Slices           []*resourceapi.ResourceSlice
	Classes          []*resourceapi.DeviceClass
	DeviceTaintRules []*resourceapi.DeviceTaintRule
	// Skipped counts objects of kinds the scheduler does not read here.
	Skipped map[string]int
}

// readPaths reads files and directories (.yaml, .yml, .json) as `simulate`
// does: directories are read recursively in name order.
func readPaths(paths []string) ([]byte, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			ext := strings.ToLower(filepath.Ext(path))
			if !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	var all bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		all.WriteString("\n---\n")
		all.Write(data)
		all.WriteString("\n")
	}
	return all.Bytes(), nil
}

// parseCluster reads YAML (one or many documents) or JSON, with `kind: List`
// (or any *List) flattened into its items.
func parseCluster(data []byte) (*cluster, error) {
	c := &cluster{Skipped: map[string]int{}}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]interface{}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the snapshot: %w", err)
		}
		if len(doc) == 0 {
			continue
		}
		if err := c.add(&unstructured.Unstructured{Object: doc}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *cluster) add(u *unstructured.Unstructured) error {
	if strings.HasSuffix(u.GetKind(), "List") {
		items, _, err := unstructured.NestedSlice(u.Object, "items")
		if err != nil {
			return fmt.Errorf("%s: items: %w", u.GetKind(), err)
		}
		for _, item := range items {
			m, ok := item.(map[string]interface{})
			if !ok {
				return fmt.Errorf("%s: an item is not an object", u.GetKind())
			}
			if err := c.add(&unstructured.Unstructured{Object: m}); err != nil {
				return err
			}
		}
		return nil
	}
	gvk := u.GroupVersionKind()
	var target runtime.Object
	switch {
	case gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Node":
		o := &v1.Node{}
		c.Nodes = append(c.Nodes, o)
		target = o
	case gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Pod":
		o := &v1.Pod{}
		c.Pods = append(c.Pods, o)
		target = o
	case gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Namespace":
		o := &v1.Namespace{}
		c.Namespaces = append(c.Namespaces, o)
		target = o
	case gvk.Group == "resource.k8s.io" && gvk.Version == "v1" && gvk.Kind == "ResourceClaim":
		o := &resourceapi.ResourceClaim{}
		c.Claims = append(c.Claims, o)
		target = o
	case gvk.Group == "resource.k8s.io" && gvk.Version == "v1" && gvk.Kind == "ResourceClaimTemplate":
		o := &resourceapi.ResourceClaimTemplate{}
		c.Templates = append(c.Templates, o)
		target = o
	case gvk.Group == "resource.k8s.io" && gvk.Version == "v1" && gvk.Kind == "ResourceSlice":
		o := &resourceapi.ResourceSlice{}
		c.Slices = append(c.Slices, o)
		target = o
	case gvk.Group == "resource.k8s.io" && gvk.Version == "v1" && gvk.Kind == "DeviceClass":
		o := &resourceapi.DeviceClass{}
		c.Classes = append(c.Classes, o)
		target = o
	case gvk.Group == "resource.k8s.io" && gvk.Version == "v1" && gvk.Kind == "DeviceTaintRule":
		o := &resourceapi.DeviceTaintRule{}
		c.DeviceTaintRules = append(c.DeviceTaintRules, o)
		target = o
	default:
		c.Skipped[gvk.String()]++
		return nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, target); err != nil {
		return fmt.Errorf("%s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
	}
	legacyscheme.Scheme.Default(target)
	return nil
}

// normalize fills in what the API server always sets and the scheduler's
// caches key on: namespaces of namespaced objects, UIDs and resource versions.
// UIDs are derived from the object's kind and name so that runs are stable.
func (c *cluster) normalize() {
	uid := func(kind, ns, name string) types.UID {
		return types.UID(fmt.Sprintf("oracle-%s-%s-%s", strings.ToLower(kind), ns, name))
	}
	for _, n := range c.Nodes {
		if n.UID == "" {
			n.UID = uid("node", "", n.Name)
		}
		n.ResourceVersion = "1"
	}
	podUIDs := map[string]types.UID{}
	for _, p := range c.Pods {
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		if p.UID == "" {
			p.UID = uid("pod", p.Namespace, p.Name)
		}
		p.ResourceVersion = "1"
		podUIDs[p.Namespace+"/"+p.Name] = p.UID
	}
	for _, cl := range c.Claims {
		if cl.Namespace == "" {
			cl.Namespace = "default"
		}
		if cl.UID == "" {
			cl.UID = uid("resourceclaim", cl.Namespace, cl.Name)
		}
		cl.ResourceVersion = "1"
		// A snapshot written without pod UIDs names owners by name; the
		// API server always has the UID.
		for i := range cl.OwnerReferences {
			ref := &cl.OwnerReferences[i]
			if ref.Kind == "Pod" && ref.UID == "" {
				ref.UID = podUIDs[cl.Namespace+"/"+ref.Name]
			}
		}
	}
	for _, t := range c.Templates {
		if t.Namespace == "" {
			t.Namespace = "default"
		}
		t.ResourceVersion = "1"
	}
	for _, s := range c.Slices {
		if s.UID == "" {
			s.UID = uid("resourceslice", "", s.Name)
		}
		s.ResourceVersion = "1"
	}
	for _, d := range c.Classes {
		d.ResourceVersion = "1"
	}
	for _, r := range c.DeviceTaintRules {
		if r.UID == "" {
			r.UID = uid("devicetaintrule", "", r.Name)
		}
		r.ResourceVersion = "1"
	}
	for _, ns := range c.Namespaces {
		ns.ResourceVersion = "1"
	}
}
