// Command upstream decodes one shoal JSON document with Go's encoding/json into the types
// of the spec's `catalog` and `drivers` packages and the upstream `types` members they
// leave open (RegionSpec, InstanceTypeSpec, Selector), as a Go client of those packages
// would, and prints what it read as a small JSON summary for tests/cli/test_upstream_go.py
// to compare with what shoal printed.
//
// Usage: upstream KIND < document.json, KIND one of regions, types, resources,
// resources-window, pricing, pricing-window, filter, options, image. A document that does
// not decode exits 1 with Go's error on stderr.
//
// The types are written from the documented shapes (catalog.txt, drivers.txt, and the
// upstream members named in the issue); standard library only.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// -- the upstream `types` members catalog.txt leaves open --------------------------------

type AWSRegion struct {
	Region string `json:"region"`
	Zone   string `json:"zone,omitempty"`
}

type LambdaCloudRegion struct {
	Region string `json:"region"`
}

type KubernetesRegion struct {
	Context   string `json:"context,omitempty"`
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

type RegionSpec struct {
	AWS         *AWSRegion         `json:"aws,omitempty"`
	LambdaCloud *LambdaCloudRegion `json:"lambdaCloud,omitempty"`
	Kubernetes  *KubernetesRegion  `json:"kubernetes,omitempty"`
}

type InstanceTypeSpec struct {
	InstanceType string `json:"instanceType"`
}

type Selector struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

type ResourceProvisionType string

// -- catalog.txt -------------------------------------------------------------------------

type ListResourceFilter struct {
	ResourceSelectors []Selector `json:"resourceSelectors"`
}

type ResourceItem map[string]map[string]string

type ScheduledResourceItem map[string]ResourceItem

type ResourceStatItem struct {
	Allocated   ResourceItem `json:"allocated"`
	Supply      ResourceItem `json:"supply"`
	Allocatable ResourceItem `json:"allocatable"`
}

type ScheduledResourceStatItem struct {
	Allocated   ScheduledResourceItem `json:"allocated"`
	Supply      ScheduledResourceItem `json:"supply"`
	Allocatable ScheduledResourceItem `json:"allocatable"`
}

type ResourceStat struct {
	OnDemand  *ResourceStatItem          `json:"onDemand,omitempty"`
	Spot      *ResourceStatItem          `json:"spot,omitempty"`
	Scheduled *ScheduledResourceStatItem `json:"scheduled,omitempty"`
}

type RegionResourceItem struct {
	NextLevel []RegionResourceItem `json:"nextLevel,omitempty"`
	Key       string               `json:"key"`
	Value     string               `json:"value"`
	Stat      ResourceStat         `json:"stat"`
}

type RegionResource struct {
	Region    *RegionSpec                     `json:"region"`
	Overview  []RegionResourceItem            `json:"overview"`
	Breakdown map[string][]RegionResourceItem `json:"breakdown,omitempty"`
}

type Resource struct {
	RegionResource
	Provider ResourceProvisionType `json:"provider"`
}

type ResourceListOptions struct {
	Region    RegionSpec          `json:"region"`
	StartTime *time.Time          `json:"start_time,omitempty"`
	EndTime   *time.Time          `json:"end_time,omitempty"`
	Filter    *ListResourceFilter `json:"filter,omitempty"`
}

type ResourcePricingItem struct {
	OnDemandPrice  *float64 `json:"onDemandPrice,omitempty"`
	SpotPrice      *float64 `json:"spotPrice,omitempty"`
	ScheduledPrice *float64 `json:"scheduledPrice,omitempty"`
}

type ResourcePricing struct {
	Region RegionSpec                     `json:"region"`
	Items  map[string]ResourcePricingItem `json:"items"`
}

// -- drivers.txt -------------------------------------------------------------------------

type Image struct {
	Url     string `json:"url"`
	Sum     string `json:"sum"`
	Name    string `json:"name"`
	Version string `json:"version"`
	Tag     string `json:"tag"`
}

// -- what was read -----------------------------------------------------------------------

// Region is what a Go client knows of a region: its provider member, or nothing.
type Region struct {
	Provider  string `json:"provider"`
	Region    string `json:"region,omitempty"`
	Zone      string `json:"zone,omitempty"`
	Context   string `json:"context,omitempty"`
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

func region(r *RegionSpec) Region {
	switch {
	case r == nil:
		return Region{}
	case r.AWS != nil:
		return Region{Provider: "aws", Region: r.AWS.Region, Zone: r.AWS.Zone}
	case r.LambdaCloud != nil:
		return Region{Provider: "lambdaCloud", Region: r.LambdaCloud.Region}
	case r.Kubernetes != nil:
		k := r.Kubernetes
		return Region{
			Provider: "kubernetes", Context: k.Context, Cluster: k.Cluster, Namespace: k.Namespace,
		}
	}
	return Region{}
}

// Counts of what a Resource's stats hold, to show they were read, not skipped.
type resourceRead struct {
	Provider  string   `json:"provider"`
	Region    Region   `json:"region"`
	Overview  []string `json:"overview"` // key=value of each overview item
	Breakdown []string `json:"breakdown"`
	Stats     int      `json:"stats"` // onDemand, spot and scheduled stats, every level
}

func countStats(items []RegionResourceItem) int {
	n := 0
	for _, item := range items {
		for _, present := range []bool{
			item.Stat.OnDemand != nil, item.Stat.Spot != nil, item.Stat.Scheduled != nil,
		} {
			if present {
				n++
			}
		}
		n += countStats(item.NextLevel)
	}
	return n
}

func readResource(r Resource) resourceRead {
	out := resourceRead{
		Provider: string(r.Provider), Region: region(r.Region),
		Overview: []string{}, Breakdown: []string{},
	}
	for _, item := range r.Overview {
		out.Overview = append(out.Overview, item.Key+"="+item.Value)
	}
	out.Stats = countStats(r.Overview)
	for name, items := range r.Breakdown {
		out.Breakdown = append(out.Breakdown, name)
		out.Stats += countStats(items)
	}
	sort.Strings(out.Breakdown)
	return out
}

type pricingRead struct {
	Region Region   `json:"region"`
	Items  []string `json:"items"`  // instance types, sorted
	Prices int      `json:"prices"` // prices present (on-demand, spot, scheduled)
}

func readPricing(p ResourcePricing) pricingRead {
	out := pricingRead{Region: region(&p.Region), Items: []string{}}
	for name, item := range p.Items {
		out.Items = append(out.Items, name)
		for _, price := range []*float64{item.OnDemandPrice, item.SpotPrice, item.ScheduledPrice} {
			if price != nil {
				out.Prices++
			}
		}
	}
	sort.Strings(out.Items)
	return out
}

func summary(kind string, data []byte) (any, error) {
	switch kind {
	case "regions":
		var regions []RegionSpec
		if err := json.Unmarshal(data, &regions); err != nil {
			return nil, err
		}
		out := []Region{}
		for i := range regions {
			out = append(out, region(&regions[i]))
		}
		return out, nil
	case "types":
		var types []InstanceTypeSpec
		if err := json.Unmarshal(data, &types); err != nil {
			return nil, err
		}
		out := []string{}
		for _, t := range types {
			out = append(out, t.InstanceType)
		}
		return out, nil
	case "resources":
		var resources []Resource
		if err := json.Unmarshal(data, &resources); err != nil {
			return nil, err
		}
		out := []resourceRead{}
		for _, r := range resources {
			out = append(out, readResource(r))
		}
		return out, nil
	case "resources-window":
		var points map[string]Resource
		if err := json.Unmarshal(data, &points); err != nil {
			return nil, err
		}
		out := map[string]resourceRead{}
		for at, r := range points {
			if _, err := time.Parse(time.RFC3339, at); err != nil {
				return nil, fmt.Errorf("window key %q: %w", at, err)
			}
			out[at] = readResource(r)
		}
		return out, nil
	case "pricing":
		var pricings []ResourcePricing
		if err := json.Unmarshal(data, &pricings); err != nil {
			return nil, err
		}
		out := []pricingRead{}
		for _, p := range pricings {
			out = append(out, readPricing(p))
		}
		return out, nil
	case "pricing-window":
		var points map[string]ResourcePricing
		if err := json.Unmarshal(data, &points); err != nil {
			return nil, err
		}
		out := map[string]pricingRead{}
		for at, p := range points {
			if _, err := time.Parse(time.RFC3339, at); err != nil {
				return nil, fmt.Errorf("window key %q: %w", at, err)
			}
			out[at] = readPricing(p)
		}
		return out, nil
	case "filter":
		var filter ListResourceFilter
		if err := json.Unmarshal(data, &filter); err != nil {
			return nil, err
		}
		return filter.ResourceSelectors, nil
	case "options":
		var opts ResourceListOptions
		if err := json.Unmarshal(data, &opts); err != nil {
			return nil, err
		}
		selectors := []Selector{}
		if opts.Filter != nil {
			selectors = opts.Filter.ResourceSelectors
		}
		return map[string]any{
			"region": region(&opts.Region), "start_time": opts.StartTime,
			"end_time": opts.EndTime, "selectors": selectors,
		}, nil
	case "image":
		var image Image
		if err := json.Unmarshal(data, &image); err != nil {
			return nil, err
		}
		return image, nil
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: upstream KIND < document.json")
		os.Exit(2)
	}
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream: reading stdin:", err)
		os.Exit(1)
	}
	read, err := summary(os.Args[1], data)
	if err != nil {
		fmt.Fprintf(os.Stderr, "upstream: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	out, err := json.Marshal(read)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}
