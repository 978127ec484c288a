package catalog_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.tf.json from the current renderer")

// goldenCases are the fixtures of docs/dialect.md section 3.1 with their defaults and the listed
// overrides. Each renders to testdata/NAME.tf.json (pretty Terraform JSON, byte-exact).
var goldenCases = []struct {
	golden string
	arch   string
	b      tlisp.Bindings
}{
	{"aws-vpc-network.defaults", "aws-vpc-network", tlisp.Bindings{}},
	{"aws-vpc-network.preview-2az", "aws-vpc-network", tlisp.Bindings{
		Scalars: map[string]string{"name": "preview"},
		Lists:   map[string][]string{"availability-zones": {"us-west-2a", "us-west-2b"}},
	}},
	{"dns-record-set.defaults", "dns-record-set", tlisp.Bindings{}},
	{"cloudflare-tunnel.defaults", "cloudflare-tunnel", tlisp.Bindings{}},
	{"cloudflare-tunnel.no-cname", "cloudflare-tunnel", tlisp.Bindings{Scalars: map[string]string{"emit-cname": "false"}}},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.golden, func(t *testing.T) {
			_, got, _ := renderArch(t, tc.arch, tc.b)
			path := filepath.Join("testdata", tc.golden+".tf.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/lang/catalog -run TestGolden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the render (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
			}
		})
	}
}

// TestAWSVPCNetwork_upstreamAssertions is upstream's canonical assertion set for
// aws-vpc-network with its defaults (docs/dialect.md section 3.1 A), checked on the decoded render.
func TestAWSVPCNetwork_upstreamAssertions(t *testing.T) {
	_, out, _ := renderArch(t, "aws-vpc-network", tlisp.Bindings{})
	doc := decode(t, out)
	vpcRef := "${aws_vpc.main-vpc.id}"

	check := func(typ, name string, want map[string]any) {
		t.Helper()
		if diff := cmp.Diff(want, attrs(t, doc, typ, name)); diff != "" {
			t.Errorf("%s.%s (-want +got):\n%s", typ, name, diff)
		}
	}
	check("aws_vpc", "main-vpc", map[string]any{
		"cidr_block": "10.0.0.0/16", "enable_dns_support": true, "enable_dns_hostnames": true,
		"tags": map[string]any{"Name": "main-vpc", "Environment": "production"},
	})
	check("aws_internet_gateway", "main-igw", map[string]any{
		"vpc_id": vpcRef, "tags": map[string]any{"Name": "main-igw"},
	})
	for i, az := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		n := string(rune('0' + i))
		check("aws_subnet", "main-public-"+n, map[string]any{
			"vpc_id": vpcRef, "cidr_block": "10.0." + n + ".0/24", "availability_zone": az,
			"map_public_ip_on_launch": true,
			"tags":                    map[string]any{"Name": "main-public-" + az, "Tier": "public"},
		})
		check("aws_subnet", "main-private-"+n, map[string]any{
			"vpc_id": vpcRef, "cidr_block": "10.0.1" + n + ".0/24", "availability_zone": az,
			"tags": map[string]any{"Name": "main-private-" + az, "Tier": "private"},
		})
	}
	check("aws_eip", "main-nat-eip", map[string]any{"domain": "vpc", "tags": map[string]any{"Name": "main-nat-eip"}})
	check("aws_nat_gateway", "main-nat", map[string]any{
		"allocation_id": "${aws_eip.main-nat-eip.allocation_id}",
		"subnet_id":     "${aws_subnet.main-public-0.id}",
		"tags":          map[string]any{"Name": "main-nat"},
	})
	check("aws_security_group", "main-default-sg", map[string]any{
		"name_prefix": "main-default-", "vpc_id": vpcRef,
		"description": "Default security group for main VPC",
		"tags":        map[string]any{"Name": "main-default-sg"},
	})
	if doc.Data != nil || doc.Locals != nil || !cmp.Equal(doc.Provider, map[string]any{"aws": map[string]any{}}) {
		t.Errorf("only the pinned provider's empty configuration, resource and output blocks are rendered; got data=%v provider=%v locals=%v", doc.Data, doc.Provider, doc.Locals)
	}
	if got := doc.Output["vpc-id"]["value"]; got != vpcRef {
		t.Errorf("output vpc-id %v, want %s", got, vpcRef)
	}
	if n := countResources(doc); n != 11 {
		t.Errorf("%d resources, want 11", n)
	}
}

// TestAWSVPCNetwork_inputOverrides: name=preview and two AZs give preview-* names and exactly
// two public and two private subnets (docs/dialect.md section 3.1 A).
func TestAWSVPCNetwork_inputOverrides(t *testing.T) {
	_, out, _ := renderArch(t, "aws-vpc-network", tlisp.Bindings{
		Scalars: map[string]string{"name": "preview"},
		Lists:   map[string][]string{"availability-zones": {"us-west-2a", "us-west-2b"}},
	})
	doc := decode(t, out)
	want := []string{"preview-private-0", "preview-private-1", "preview-public-0", "preview-public-1"}
	if diff := cmp.Diff(want, resourceNames(doc, "aws_subnet")); diff != "" {
		t.Errorf("subnets (-want +got):\n%s", diff)
	}
	if _, ok := doc.Resource["aws_subnet"]["preview-public-2"]; ok {
		t.Error("preview-public-2 rendered with two AZs")
	}
	for typ, byName := range doc.Resource {
		for name := range byName {
			if !strings.HasPrefix(name, "preview-") {
				t.Errorf("%s.%s does not carry the preview- prefix", typ, name)
			}
		}
	}
	if got := attrs(t, doc, "aws_subnet", "preview-public-1")["availability_zone"]; got != "us-west-2b" {
		t.Errorf("preview-public-1 availability_zone = %v, want us-west-2b", got)
	}
}

// TestDNSRecordSet_defaults is docs/dialect.md section 3.1 B.
func TestDNSRecordSet_defaults(t *testing.T) {
	_, out, _ := renderArch(t, "dns-record-set", tlisp.Bindings{})
	doc := decode(t, out)
	want := map[string]map[string]map[string]any{"aws_route53_record": {
		"main-apex": {"zone_id": "Z0000000000000000000", "name": "example.com", "type": "A", "ttl": float64(300), "records": []any{"1.2.3.4"}},
		"main-www":  {"zone_id": "Z0000000000000000000", "name": "www.example.com", "type": "A", "ttl": float64(300), "records": []any{"1.2.3.4"}},
	}}
	if diff := cmp.Diff(want, doc.Resource); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if !bytes.Contains(out, []byte(`"ttl": 300,`)) {
		t.Error("ttl is not rendered as a JSON number")
	}
}

// TestCloudflareTunnel is docs/dialect.md section 3.1 C: defaults, emit-cname=false drops the record,
// emit-cname=maybe is a type error.
func TestCloudflareTunnel(t *testing.T) {
	_, out, _ := renderArch(t, "cloudflare-tunnel", tlisp.Bindings{})
	doc := decode(t, out)
	zeros, ones := strings.Repeat("0", 32), strings.Repeat("1", 32)
	tunnelID := "${cloudflare_zero_trust_tunnel_cloudflared.demo-tunnel.id}"
	want := map[string]map[string]map[string]any{
		"cloudflare_zero_trust_tunnel_cloudflared": {"demo-tunnel": {
			"account_id": zeros, "name": "demo-tunnel", "tunnel_secret": "AQIDBAUGBwgBAgMEBQYHCAECAwQFBgcIAQIDBAUGBwg=",
			"config_src": "cloudflare",
		}},
		"cloudflare_zero_trust_tunnel_cloudflared_config": {"demo-tunnel-config": {
			"account_id": zeros, "tunnel_id": tunnelID,
			"config": map[string]any{"ingress": []any{
				map[string]any{"hostname": "demo.example.com", "service": "http://localhost:8080"},
				map[string]any{"service": "http_status:404"},
			}},
		}},
		"cloudflare_dns_record": {"demo-tunnel-public-cname": {
			"zone_id": ones, "name": "demo.example.com", "type": "CNAME",
			"content": "${local.tunnel_id}.cfargotunnel.com", "ttl": float64(1), "proxied": true,
			"comment": "Tunnel ingress for demo-tunnel",
		}},
	}
	if diff := cmp.Diff(want, doc.Resource); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if got := doc.Locals["tunnel_id"]; got != tunnelID {
		t.Errorf("local tunnel_id = %v, want %s", got, tunnelID)
	}
	wantData := map[string]map[string]map[string]any{"cloudflare_zero_trust_tunnel_cloudflared_token": {"demo-tunnel": {
		"account_id": zeros, "tunnel_id": tunnelID,
	}}}
	if diff := cmp.Diff(wantData, doc.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}

	for _, v := range []string{"false", "#f", "0"} {
		_, out, _ := renderArch(t, "cloudflare-tunnel", tlisp.Bindings{Scalars: map[string]string{"emit-cname": v}})
		doc := decode(t, out)
		if _, ok := doc.Resource["cloudflare_dns_record"]; ok {
			t.Errorf("emit-cname=%s still renders the CNAME", v)
		}
		if n := countResources(doc); n != 2 {
			t.Errorf("emit-cname=%s: %d resources, want 2", v, n)
		}
	}

	e, _ := catalog.Get("cloudflare-tunnel")
	a, diags := tlisp.EvalArchitecture(e.Source, tlisp.Bindings{Scalars: map[string]string{"emit-cname": "maybe"}}, tlisp.Options{File: catalog.File("cloudflare-tunnel")})
	if a != nil || !diags.HasErrors() {
		t.Fatalf("emit-cname=maybe evaluated: %v", diags)
	}
	msg := diags.Errors()[0].String()
	if !strings.HasPrefix(msg, "bundled/cloudflare-tunnel.tlisp:") || !strings.Contains(msg, "type mismatch: expected boolean (true|false|#t|#f|1|0)") {
		t.Errorf("emit-cname=maybe error %q, want a positioned boolean type mismatch", msg)
	}
}
