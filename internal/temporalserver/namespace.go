package temporalserver

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	enums "go.temporal.io/api/enums/v1"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"
)

// configureNamespace brings an existing namespace in line with the options:
// retention and search attributes. A fresh database already has both (see
// createNamespace); this covers a database from an earlier start with other
// options. It talks to the running server like any client would.
func configureNamespace(ctx context.Context, frontendAddr string, o Options, logger *slog.Logger) error {
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  frontendAddr,
		Namespace: o.Namespace,
		Logger:    sdklog.NewStructuredLogger(logger),
	})
	if err != nil {
		return fmt.Errorf("connect to embedded temporal at %s: %w", frontendAddr, err)
	}
	defer c.Close()

	if err := ensureRetention(ctx, c.WorkflowService(), o.Namespace, o.Retention); err != nil {
		return err
	}
	return ensureSearchAttributes(ctx, c.OperatorService(), o.Namespace, o.SearchAttributes)
}

func ensureRetention(ctx context.Context, svc workflowservice.WorkflowServiceClient, namespace string, retention time.Duration) error {
	desc, err := svc.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("describe namespace %q: %w", namespace, err)
	}
	if desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() == retention {
		return nil
	}
	_, err = svc.UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
		Namespace: namespace,
		Config:    &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(retention)},
	})
	if err != nil {
		return fmt.Errorf("set retention of namespace %q to %s: %w", namespace, retention, err)
	}
	return nil
}

// ensureSearchAttributes adds the missing attributes and waits until the
// server lists them. An existing attribute of another type is an error: the
// server cannot change a type, and workflows would fail to set it.
func ensureSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string, want map[string]enums.IndexedValueType) error {
	if len(want) == 0 {
		return nil
	}
	have, err := listSearchAttributes(ctx, op, namespace)
	if err != nil {
		return err
	}
	missing := map[string]enums.IndexedValueType{}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		got, ok := have[name]
		switch {
		case !ok:
			missing[name] = want[name]
		case got != want[name]:
			return fmt.Errorf("search attribute %s exists in namespace %q as %s, want %s; remove it or rename ours",
				name, namespace, got, want[name])
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: missing,
	})
	if err != nil {
		return fmt.Errorf("add search attributes %v to namespace %q: %w", slices.Sorted(maps.Keys(missing)), namespace, err)
	}

	// The namespace cache refreshes every few seconds; wait so that callers can
	// start workflows with the new attributes as soon as Start returns.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		have, err := listSearchAttributes(ctx, op, namespace)
		if err != nil {
			return err
		}
		if hasAll(have, missing) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for search attributes on namespace %q: %w", namespace, ctx.Err())
		case <-tick.C:
		}
	}
}

func listSearchAttributes(ctx context.Context, op operatorservice.OperatorServiceClient, namespace string) (map[string]enums.IndexedValueType, error) {
	resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of namespace %q: %w", namespace, err)
	}
	return resp.GetCustomAttributes(), nil
}

func hasAll(have, want map[string]enums.IndexedValueType) bool {
	for name, typ := range want {
		if have[name] != typ {
			return false
		}
	}
	return true
}
