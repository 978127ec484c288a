package planpolicy

import (
	"fmt"
	"strings"
	"sync"
)

// StatefulTypes are the resource types of the built-in rule: types that hold data a
// replacement or deletion loses (databases, volumes, buckets, queues, key stores), of the
// providers the bundled architectures and the tested providers use.
var StatefulTypes = []string{
	"aws_db_instance", "aws_rds_cluster", "aws_dynamodb_table", "aws_s3_bucket", "aws_efs_file_system",
	"aws_ebs_volume", "aws_elasticache_cluster", "aws_elasticache_replication_group", "aws_kms_key",
	"aws_sqs_queue", "aws_kinesis_stream", "aws_redshift_cluster", "aws_opensearch_domain",
	"google_sql_database_instance", "google_sql_database", "google_storage_bucket", "google_bigtable_instance",
	"google_spanner_instance", "google_spanner_database", "google_compute_disk", "google_kms_crypto_key",
	"google_pubsub_topic", "google_filestore_instance", "google_redis_instance",
	"azurerm_mssql_database", "azurerm_postgresql_flexible_server", "azurerm_mysql_flexible_server",
	"azurerm_storage_account", "azurerm_cosmosdb_account", "azurerm_managed_disk", "azurerm_key_vault",
	"azurerm_redis_cache",
	"cloudflare_r2_bucket", "cloudflare_d1_database", "cloudflare_workers_kv_namespace",
	"github_repository",
	"openstack_blockstorage_volume_v3", "openstack_db_instance_v1", "openstack_objectstorage_container_v1",
	"openstack_identity_project_v3",
	"kubernetes_persistent_volume_claim", "kubernetes_persistent_volume", "kubernetes_namespace",
}

// DefaultRuleName names the built-in rule.
const DefaultRuleName = "stateful-replace-or-delete"

// DefaultRules are the rules of a namespace whose policy document sets no planRules: a
// replacement or deletion of a [StatefulTypes] resource requires an approval of the plan's
// id, whatever spec.approvePlan says. An admin's planRules replace them (an empty list: no
// rules).
func DefaultRules() []Rule {
	quoted := make([]string, len(StatefulTypes))
	for i, t := range StatefulTypes {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	return []Rule{{
		Name:    DefaultRuleName,
		Change:  `change.mode == "managed" && "delete" in change.actions && change.type in [` + strings.Join(quoted, ", ") + `]`,
		Verdict: RequireApproval,
		Message: "replacing or deleting a resource that holds data needs an approval of this plan's id",
	}}
}

// Default is [DefaultRules] compiled, once, on first use (a process that never evaluates a plan
// never builds the CEL environment).
var Default = sync.OnceValue(func() *Set { return MustCompile(DefaultRules()) })
