package main

import (
	"strings"
	"testing"

	"github.com/lava-operator/lava/internal/lang/arch"
)

func TestCatalogLs(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runLava(t, "", "catalog", "ls")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "NAME") {
		t.Errorf("no header: %q", lines[0])
	}
	if got := len(lines) - 1; got != 41 {
		t.Errorf("catalog ls lists %d architectures, want 41:\n%s", got, stdout)
	}
	var vpc string
	for _, l := range lines {
		if strings.HasPrefix(l, "aws-vpc-network ") {
			vpc = l
		}
	}
	if f := strings.Fields(vpc); len(f) < 4 || f[1] != "11" || f[2] != "4" || f[3] != "0" {
		t.Errorf("aws-vpc-network line = %q, want 11 resources, 4 inputs, 0 required", vpc)
	}
}

func TestCatalogShow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{
			name: "aws-vpc-network",
			args: []string{"catalog", "show", "aws-vpc-network"},
			stdout: []string{
				"Name:       aws-vpc-network\n",
				"Resources:  11 with the defaults\n",
				`availability-zones  (:list-of :availability-zone :min-items 1)  no        ("us-east-1a" "us-east-1b" "us-east-1c")`,
				`cidr                :cidr-block`,
				"\nResources:\n  aws_vpc \"{name}-vpc\"\n  aws_internet_gateway \"{name}-igw\"\n  for each item of availability-zones:\n    aws_subnet \"{name}-public-{i}\"\n",
				"Outputs (rendered):\n  vpc-id = (ref aws-vpc \"{name}-vpc\" id)\n",
				"aws-vpc-network, closed: with spec.gate (or --gate) naming it, a binding it does not declare is rejected",
				"public-subnet-ids    (:list-of :string)",
			},
		},
		{
			name:   "module directories are listed",
			args:   []string{"catalog", "show", "modules-demo"},
			stdout: []string{"Modules:    modules/stamp, modules/stamp/tag (bundled in the rendered document)\n"},
		},
		{
			name:   "required inputs are marked",
			args:   []string{"catalog", "show", "dns-record-set"},
			stdout: []string{"zone-id      :string    yes       \"Z0000000000000000000\"", "apex-target  :ipv4      no"},
		},
		{
			name:   "--source prints the file",
			args:   []string{"catalog", "show", "--source", "dns-record-set"},
			stdout: []string{"(deflava-architecture dns-record-set", "(deflava-interface dns-record-set"},
		},
		{name: "unknown name", args: []string{"catalog", "show", "nope"}, code: exitInvalid, stderr: []string{`lava: unknown bundled architecture "nope"`}},
		{name: "no name", args: []string{"catalog", "show"}, code: exitUsage},
		{name: "ls takes no argument", args: []string{"catalog", "ls", "x"}, code: exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runLava(t, "", tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

// TestCatalogShow_everyEntry shows every bundled architecture: none may fail.
func TestCatalogShow_everyEntry(t *testing.T) {
	t.Parallel()
	_, stdout, _ := runLava(t, "", "catalog", "ls")
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n")[1:] {
		name := strings.Fields(l)[0]
		code, out, stderr := runLava(t, "", "catalog", "show", name)
		if code != exitOK || !strings.Contains(out, "Name:       "+name) {
			t.Errorf("catalog show %s: exit %d, stderr %s", name, code, stderr)
		}
	}
}

func TestTypeString(t *testing.T) {
	t.Parallel()
	two, five := 2, 5
	tests := []struct {
		typ  arch.Type
		want string
	}{
		{arch.Type{Kind: arch.TypeCIDRBlock}, ":cidr-block"},
		{arch.Type{Kind: arch.TypeListOf, Elem: &arch.Type{Kind: arch.TypeString}, MinItems: &two, MaxItems: &five}, "(:list-of :string :min-items 2 :max-items 5)"},
		{arch.Type{Kind: arch.TypeEnum, Enum: []string{"full", "partial"}}, `(:enum "full" "partial")`},
		{arch.Type{Kind: arch.TypePortRange, Lo: 1024, Hi: 65535}, "(:port-range :lo 1024 :hi 65535)"},
		{arch.Type{Kind: arch.TypeIntRange, Lo: -1, Hi: 1}, "(:int-range :lo -1 :hi 1)"},
		{arch.Type{Kind: arch.TypeLength, MinLen: &two}, "(:length :min 2)"},
		{arch.Type{Kind: arch.TypePattern, Pattern: "https://", Match: "starts-with"}, `(:pattern :source "https://" :match-kind starts-with)`},
	}
	for _, tt := range tests {
		if got := typeString(tt.typ); got != tt.want {
			t.Errorf("typeString = %q, want %q", got, tt.want)
		}
	}
}
