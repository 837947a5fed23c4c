package temporalserver

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	tlog "go.temporal.io/server/common/log"
	pgschema "go.temporal.io/server/schema/postgresql/v12"
	"go.temporal.io/server/tools/common/schema"
	tsql "go.temporal.io/server/tools/sql"

	"github.com/agentryhq/agentry/dev/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// postgresOptions are testOptions on two fresh PostgreSQL databases.
func postgresOptions(t *testing.T) Options {
	t.Helper()
	o := testOptions(t)
	o.DataDir = ""
	o.Postgres = &Postgres{DSN: testenv.Postgres(t), VisibilityDSN: testenv.Postgres(t), HistoryShards: 2}
	return o
}

func runEcho(t *testing.T, c client.Client, id, in string) {
	t.Helper()
	w := worker.New(c, testTaskQueue, worker.Options{})
	w.RegisterWorkflow(echoWorkflow)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        id,
		TaskQueue: testTaskQueue,
		TypedSearchAttributes: sdktemporal.NewSearchAttributes(
			sdktemporal.NewSearchAttributeKeyInt64("AgentryTaskID").ValueSet(42),
			sdktemporal.NewSearchAttributeKeyKeyword("AgentryAgentID").ValueSet("researcher"),
		),
	}, echoWorkflow, in)
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow result: %v", err)
	}
	if out != "echo: "+in {
		t.Fatalf("workflow result = %q", out)
	}
}

// The server on PostgreSQL sets up Temporal's schema in both databases,
// runs a workflow, finds it by our search attributes through PostgreSQL
// visibility, and keeps its history across a restart on the same databases.
func TestPostgresRunRestartKeepHistory(t *testing.T) {
	o := postgresOptions(t)
	s := startServer(t, o)
	c := dial(t, s)
	checkSearchAttributes(t, c, s.Namespace(), DefaultSearchAttributes())
	runEcho(t, c, testWorkflowID, "hello")
	waitVisible(t, c, s.Namespace(), "AgentryTaskID = 42 AND AgentryAgentID = 'researcher'", testWorkflowID)
	c.Close()
	stopServer(t, s)

	s = startServer(t, o) // existing schema, existing namespace
	c = dial(t, s)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := c.DescribeWorkflowExecution(ctx, testWorkflowID, "")
	if err != nil {
		t.Fatalf("describe the workflow of the first start: %v", err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus().String(); st != "Completed" {
		t.Fatalf("status after restart = %s", st)
	}
	runEcho(t, c, "task-43", "again")
	stopServer(t, s)
}

// A database whose schema an older Temporal set up is refused with the flag
// that upgrades it; with the flag, Temporal's own versioned updates bring it
// to the version this server needs and the server runs.
func TestPostgresOlderSchemaNeedsUpgrade(t *testing.T) {
	o := postgresOptions(t)
	stores, err := o.Postgres.stores()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tsql.NewConnection(stores.main, tlog.NewNoopLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, tlog.NewNoopLogger()).Run(); err != nil {
		t.Fatal(err)
	}
	const older = "1.17"
	if err := schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: stores.main.DatabaseName, SchemaName: pgMainSchema, TargetVersion: older}, tlog.NewNoopLogger()).Run(); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = Start(ctx, o)
	var verErr *SchemaVersionError
	if !errors.As(err, &verErr) {
		t.Fatalf("Start on a %s schema: err = %v, want *SchemaVersionError", older, err)
	}
	for _, want := range []string{PostgresKey, UpgradeSchemaKey, older, pgschema.Version} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	o.Postgres.UpgradeSchema = true
	s := startServer(t, o)
	c := dial(t, s)
	defer c.Close()
	runEcho(t, c, testWorkflowID, "upgraded")
}

// A PostgreSQL that refuses connections stops the start at once with the key
// to fix; a bad DSN does too, without echoing it (it may carry a password).
func TestPostgresBadInput(t *testing.T) {
	o := testOptions(t)
	o.DataDir = ""
	port := strconv.Itoa(testenv.FreePort(t))
	o.Postgres = &Postgres{DSN: "postgres://temporal:s3cret@127.0.0.1:" + port + "/temporal?sslmode=disable&connect_timeout=5"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	_, err := Start(ctx, o)
	if err == nil || !strings.Contains(err.Error(), PostgresKey) || !strings.Contains(err.Error(), "127.0.0.1:"+port) {
		t.Fatalf("refused PostgreSQL: err = %v, want one naming %s and the address", err, PostgresKey)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error leaks the password: %v", err)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("refused PostgreSQL took %s to report", d)
	}

	for dsn, want := range map[string]string{
		"postgres://u:s3cret@[::1:5432/x": "not a PostgreSQL DSN",
		"   ":                             "empty PostgreSQL DSN",
	} {
		o.Postgres = &Postgres{DSN: dsn}
		_, err := Start(ctx, o)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("DSN %q: err = %v, want %q without the password", dsn, err, want)
		}
	}
	o.Postgres = &Postgres{DSN: "postgres://u@h/t", HistoryShards: -1}
	if _, err := Start(ctx, o); err == nil || !strings.Contains(err.Error(), HistoryShardsKey) {
		t.Errorf("negative shards: err = %v", err)
	}
}

func TestPostgresVisibilityDefaultsToSuffixedDatabase(t *testing.T) {
	p := &Postgres{DSN: "host=db.internal port=6543 user=t password=p dbname=temporal sslmode=disable"}
	st, err := p.stores()
	if err != nil {
		t.Fatal(err)
	}
	if st.main.DatabaseName != "temporal" || st.visibility.DatabaseName != "temporal_visibility" ||
		st.main.ConnectAddr != "db.internal:6543" || st.visibility.Password != "p" {
		t.Fatalf("stores = %+v / %+v", st.main, st.visibility)
	}
	p.VisibilityDSN = p.DSN
	if _, err := p.stores(); err == nil || !strings.Contains(err.Error(), PostgresVisibilityKey) {
		t.Fatalf("same database twice: err = %v", err)
	}
}
