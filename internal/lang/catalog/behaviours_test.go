package catalog_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lava-operator/lava/internal/lang/catalog"
	"github.com/lava-operator/lava/internal/lang/tlisp"
)

// TestCloudflareDNSRecords: five records named @, www, api, *.staging and _acme-challenge; the
// first three proxied, the wildcard and the TXT not (docs/dialect.md section 11, lava-architectures).
func TestCloudflareDNSRecords(t *testing.T) {
	zone := sample["zone-id"]
	_, out, _ := renderArch(t, "cloudflare-dns-records", tlisp.Bindings{Scalars: map[string]string{"zone-id": zone}})
	doc := decode(t, out)
	type rec struct {
		Name, Type string
		Proxied    bool
	}
	got := map[string]rec{}
	for name, a := range doc.Resource["cloudflare_dns_record"] {
		got[name] = rec{a["name"].(string), a["type"].(string), a["proxied"].(bool)}
		if a["zone_id"] != zone {
			t.Errorf("%s: zone_id %v, want the bound %s", name, a["zone_id"], zone)
		}
		if a["proxied"] == true && a["ttl"] != float64(1) {
			t.Errorf("%s: proxied record with ttl %v, Cloudflare requires 1", name, a["ttl"])
		}
	}
	want := map[string]rec{
		"root-cname":             {"@", "CNAME", true},
		"www-cname":              {"www", "CNAME", true},
		"api-cname":              {"api", "CNAME", true},
		"wildcard-staging-cname": {"*.staging", "CNAME", false},
		"acme-challenge-txt":     {"_acme-challenge", "TXT", false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}

	_, out, _ = renderArch(t, "cloudflare-dns-records", tlisp.Bindings{Scalars: map[string]string{"zone-id": zone, "name-prefix": "staging-", "acme-token": "tok"}})
	doc = decode(t, out)
	if a := attrs(t, doc, "cloudflare_dns_record", "staging-acme-challenge-txt"); a["content"] != "tok" || a["name"] != "_acme-challenge" {
		t.Errorf("overrides: acme record %v", a)
	}
}

// TestAkeylessSecrets: every Akeyless object lives under /{name-prefix}/ and the database
// target is PostgreSQL (docs/dialect.md section 11).
func TestAkeylessSecrets(t *testing.T) {
	for _, prefix := range []string{"prod", "staging"} {
		_, out, _ := renderArch(t, "akeyless-secrets", tlisp.Bindings{Scalars: map[string]string{"name-prefix": prefix}})
		doc := decode(t, out)
		n := 0
		for typ, byName := range doc.Resource {
			for name, a := range byName {
				n++
				if !strings.HasPrefix(name, prefix+"-") {
					t.Errorf("%s.%s: resource name without the %s- prefix", typ, name, prefix)
				}
				p, _ := a["name"].(string)
				if typ == "akeyless_static_secret" {
					p, _ = a["path"].(string)
				}
				if !strings.HasPrefix(p, "/"+prefix+"/") {
					t.Errorf("%s.%s: Akeyless path %q is not under /%s/", typ, name, p, prefix)
				}
			}
		}
		if n != 6 {
			t.Errorf("name-prefix=%s: %d resources, want 6", prefix, n)
		}
		db := attrs(t, doc, "akeyless_target_db", prefix+"-db-target")
		if db["db_type"] != "postgres" || db["port"] != "5432" {
			t.Errorf("db target %v, want db_type postgres on port 5432", db)
		}
		role := attrs(t, doc, "akeyless_role", prefix+"-app-role")
		rules := role["rules"].([]any)[0].(map[string]any)
		if rules["path"] != "/"+prefix+"/*" {
			t.Errorf("role rule path %v, want /%s/*", rules["path"], prefix)
		}
	}
}

// discordArgs lists the arguments of each discord_* resource type of the Lucky3028/discord
// provider that pleme-io-server uses (from the provider's documentation): the provider-schema
// fixture upstream's test checked attributes against.
var discordArgs = map[string][]string{
	"discord_server":             {"name", "region", "verification_level", "explicit_content_filter", "default_message_notifications", "afk_channel_id", "afk_timeout", "icon_url", "icon_data_uri", "splash_url", "splash_data_uri", "owner_id"},
	"discord_role_everyone":      {"server_id", "permissions"},
	"discord_role":               {"server_id", "name", "permissions", "color", "hoist", "mentionable", "position"},
	"discord_category_channel":   {"server_id", "name", "position"},
	"discord_text_channel":       {"server_id", "name", "category", "topic", "nsfw", "position", "sync_perms_with_category"},
	"discord_voice_channel":      {"server_id", "name", "category", "position", "bitrate", "user_limit", "sync_perms_with_category"},
	"discord_news_channel":       {"server_id", "name", "category", "topic", "nsfw", "position", "sync_perms_with_category"},
	"discord_forum_channel":      {"server_id", "name", "category", "topic", "nsfw", "position", "sync_perms_with_category"},
	"discord_channel_permission": {"channel_id", "type", "overwrite_id", "allow", "deny"},
	"discord_system_channel":     {"server_id", "system_channel_id"},
	"discord_invite":             {"channel_id", "max_age", "max_uses", "temporary", "unique"},
	"discord_webhook":            {"channel_id", "name", "avatar_url", "avatar_data_uri"},
	"discord_message":            {"channel_id", "content", "embed", "pinned", "tts"},
}

func TestPlemeIOServer(t *testing.T) {
	_, out, _ := renderArch(t, "pleme-io-server", tlisp.Bindings{})
	doc := decode(t, out)

	counts := map[string]int{}
	for typ, byName := range doc.Resource {
		counts[typ] = len(byName)
	}
	want := map[string]int{
		"discord_server": 1, "discord_role_everyone": 1, "discord_role": 4, "discord_category_channel": 6,
		"discord_text_channel": 18, "discord_voice_channel": 3, "discord_news_channel": 1,
		"discord_forum_channel": 1, "discord_channel_permission": 5, "discord_system_channel": 1,
		"discord_invite": 1, "discord_webhook": 1, "discord_message": 1,
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("resources per type (-want +got):\n%s", diff)
	}
	if n := countResources(doc); n != 44 {
		t.Errorf("%d resources, want 44", n)
	}

	t.Run("permission bits", func(t *testing.T) {
		bits := func(flags ...uint) float64 {
			var v uint64
			for _, f := range flags {
				v |= 1 << f
			}
			return float64(v)
		}
		const (
			createInvite, kick, ban, admin, manageChannels = 0, 1, 2, 3, 4
			addReactions, viewAuditLog, view, send         = 6, 7, 10, 11
			manageMessages, embed, attach, history         = 13, 14, 15, 16
			mentionEveryone, extEmoji, connect, speak      = 17, 18, 20, 21
			mute, move, manageWebhooks, manageThreads      = 22, 24, 29, 34
			publicThreads, sendInThreads, moderate         = 35, 38, 40
		)
		everyone := []uint{view, send, history, addReactions, connect, speak, publicThreads, sendInThreads}
		contributor := append(slices.Clone(everyone), embed, attach, extEmoji, createInvite)
		maintainer := append(slices.Clone(contributor), kick, ban, manageChannels, viewAuditLog, manageMessages, mentionEveryone, mute, move, manageWebhooks, manageThreads, moderate)
		got := map[string]any{
			"everyone":    attrs(t, doc, "discord_role_everyone", "everyone")["permissions"],
			"admin":       attrs(t, doc, "discord_role", "admin")["permissions"],
			"maintainer":  attrs(t, doc, "discord_role", "maintainer")["permissions"],
			"contributor": attrs(t, doc, "discord_role", "contributor")["permissions"],
			"bot":         attrs(t, doc, "discord_role", "bot")["permissions"],
		}
		want := map[string]any{
			"everyone":    bits(everyone...),
			"admin":       bits(admin),
			"maintainer":  bits(maintainer...),
			"contributor": bits(contributor...),
			"bot":         bits(view, send, history, addReactions, embed, attach, manageWebhooks),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("role permissions (-want +got):\n%s", diff)
		}
		for name, a := range doc.Resource["discord_channel_permission"] {
			for _, k := range []string{"allow", "deny"} {
				if v := a[k].(float64); v != 0 && v != bits(send) && v != bits(view) && v != bits(view, send, history) {
					t.Errorf("channel permission %s: %s=%v is not one of the documented overwrites", name, k, v)
				}
			}
		}
	})

	t.Run("every category reachable", func(t *testing.T) {
		used := map[string]int{}
		for _, byName := range doc.Resource {
			for _, a := range byName {
				for _, k := range []string{"category", "channel_id"} {
					if s, ok := a[k].(string); ok {
						used[s]++
					}
				}
			}
		}
		for name := range doc.Resource["discord_category_channel"] {
			if used["${discord_category_channel."+name+".id}"] == 0 {
				t.Errorf("category %s holds no channel and no permission", name)
			}
		}
	})

	t.Run("attributes conform to the provider schema", func(t *testing.T) {
		for typ, byName := range doc.Resource {
			args, ok := discordArgs[typ]
			if !ok {
				t.Errorf("type %s is not in the schema fixture", typ)
				continue
			}
			for name, a := range byName {
				for k := range a {
					if !slices.Contains(args, k) {
						t.Errorf("%s.%s: %q is not an argument of %s", typ, name, k, typ)
					}
				}
			}
		}
	})

	t.Run("guild settings set or deliberately omitted", func(t *testing.T) {
		server := attrs(t, doc, "discord_server", "pleme-io")
		set := slices.Sorted(maps.Keys(server))
		omitted := []string{"afk_channel_id", "icon_data_uri", "icon_url", "owner_id", "region", "splash_data_uri", "splash_url"}
		all := slices.Sorted(slices.Values(append(slices.Clone(set), omitted...)))
		if diff := cmp.Diff(slices.Sorted(slices.Values(discordArgs["discord_server"])), all); diff != "" {
			t.Errorf("discord_server settings neither set nor deliberately omitted (-schema +set/omitted):\n%s", diff)
		}
	})

	t.Run("channel lists drive the channels", func(t *testing.T) {
		_, out, _ := renderArch(t, "pleme-io-server", tlisp.Bindings{Lists: map[string][]string{"ops-channels": {"oncall"}, "voice-channels": {}}})
		doc := decode(t, out)
		if _, ok := doc.Resource["discord_text_channel"]["ops-oncall"]; !ok {
			t.Error("ops-oncall not rendered")
		}
		if n := len(doc.Resource["discord_voice_channel"]); n != 0 {
			t.Errorf("%d voice channels with an empty list", n)
		}
		if n := countResources(doc); n != 44-2-3 {
			t.Errorf("%d resources, want %d", n, 44-2-3)
		}
	})
}

// TestGithubOrgRepos: record bindings drive the repositories; :when flags select labels, the
// README, branch protection and imports; repo_count is a rendered output.
func TestGithubOrgRepos(t *testing.T) {
	b := tlisp.Bindings{
		Scalars: map[string]string{"owner": "pleme-io", "repo_count": "2"},
		Records: map[string][]map[string]string{
			"repos": {
				{"slug": "lava", "description": "Lava operator", "visibility": "public", "labels": "true", "readme": "true", "protect": "true", "import": "true"},
				{"slug": "magma", "description": "Magma", "visibility": "private", "labels": "false", "readme": "false", "protect": "false", "import": "false"},
			},
			"labels": {
				{"name": "bug", "color": "d73a4a", "description": "Something is broken"},
				{"name": "drift", "color": "fbca04", "description": "Infrastructure drifted"},
			},
		},
	}
	_, out, _ := renderArch(t, "github-org-repos", b)
	doc := decode(t, out)
	counts := map[string]int{}
	for typ, byName := range doc.Resource {
		counts[typ] = len(byName)
	}
	want := map[string]int{
		"github_repository": 2, "github_issue_label": 2, "github_actions_repository_permissions": 2,
		"github_repository_file": 1, "github_branch_protection": 1,
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("resources per type (-want +got):\n%s", diff)
	}
	if l := attrs(t, doc, "github_issue_label", "lava-label-drift"); l["color"] != "fbca04" || l["repository"] != "${github_repository.lava.name}" {
		t.Errorf("label %v", l)
	}
	if diff := cmp.Diff([]map[string]string{{"to": "github_repository.lava", "id": "lava"}}, doc.Import); diff != "" {
		t.Errorf("imports (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]map[string]any{"repo_count": {"value": "2"}}, doc.Output); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	if p, _ := doc.Provider["github"].(map[string]any); p["owner"] != "pleme-io" {
		t.Errorf("provider %v, want github with owner pleme-io", doc.Provider)
	}
	for _, p := range danglingRefs(doc, out) {
		t.Error(p)
	}

	// A row without a field the loop reads is an error naming the variable.
	e, _ := catalog.Get("github-org-repos")
	bad := tlisp.Bindings{Scalars: b.Scalars, Records: map[string][]map[string]string{"repos": {{"slug": "x"}}, "labels": {}}}
	_, diags := tlisp.EvalArchitecture(e.Source, bad, tlisp.Options{File: catalog.File("github-org-repos")})
	if !diags.HasErrors() || !strings.Contains(diags.Errors().Error(), "repo_description") {
		t.Errorf("a row without description: %v, want an unknown var repo_description error", diags)
	}
}

// TestSanitizedDomainNames: resource names built from a domain render sanitized, with the same
// rule in refs, and a warning naming the original (docs/dialect.md section 3).
func TestSanitizedDomainNames(t *testing.T) {
	_, out, warnings := renderArch(t, "pleme-io-dns", tlisp.Bindings{Scalars: map[string]string{
		"account-id": sample["account-id"], "dkim-record": sample["dkim-record"]}})
	doc := decode(t, out)
	if _, ok := doc.Resource["cloudflare_zone"]["pleme-io"]; !ok {
		t.Fatalf("zone not rendered as pleme-io: %v", resourceNames(doc, "cloudflare_zone"))
	}
	for name, a := range doc.Resource["cloudflare_dns_record"] {
		if a["zone_id"] != "${cloudflare_zone.pleme-io.id}" {
			t.Errorf("%s: zone_id %v", name, a["zone_id"])
		}
	}
	if !strings.Contains(warnings.Error(), `"pleme.io"`) {
		t.Errorf("no warning names the original pleme.io: %v", warnings)
	}

	_, out, _ = renderArch(t, "dns-record-set-typed", tlisp.Bindings{Scalars: map[string]string{"zone-id": "Z1", "domain": "example.com"}})
	want := []string{"apex-example-com", "mx-example-com", "verify-example-com", "www-example-com"}
	if diff := cmp.Diff(want, resourceNames(decode(t, out), "aws_route53_record")); diff != "" {
		t.Errorf("dns-record-set-typed names (-want +got):\n%s", diff)
	}
}

// TestDanglingRefs_detects checks the RefValid helper itself on a render with broken refs.
func TestDanglingRefs_detects(t *testing.T) {
	raw := []byte(`{"resource":{"aws_vpc":{"a":{"x":"${aws_subnet.b.id}","y":"${data.aws_ami.u.id}","z":"${cidrsubnet(aws_vpc.a.cidr_block, 8, 1)}"}}},"import":[{"to":"aws_vpc.q","id":"q"}]}`)
	got := danglingRefs(decode(t, raw), raw)
	if len(got) != 3 {
		t.Fatalf("found %d problems, want 3 (subnet, data source, import): %v", len(got), got)
	}
}
