package agentry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// packageCommand is `package install <git URL>` and `package status
// <job>` (docs/package-install.md): the install is a job on the gateway
// (a PackageInstall workflow); the client starts it and shows its
// progress until it ends, across gateway restarts.
func (a *App) packageCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "package", Short: "Install agent packages from git sources (jobs on the gateway)"}
	var req apiclient.PackageInstallRequest
	var detach bool
	install := &cobra.Command{
		Use:   "install GIT_URL [--allow-unverified] [--allow-host-build] [--enable] [--overwrite] [--detach]",
		Short: "Install an agent from a git repository as a job on the gateway, showing its progress",
		Long: `install asks the gateway to fetch the repository, verify it, build it when
the source asks for a build and --allow-host-build approves it, and install
the agent (disabled unless --enable). A package signed by a key of a
configured registry is verified; anything else (an unsigned package, raw
agent.yaml source) needs --allow-unverified. The job survives a gateway
restart: the client waits for it, or re-attach with package status JOB.`,
		Args: exactArgs(1, "GIT_URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			req.Source = args[0]
			job, err := c.StartPackageInstall(cmd.Context(), req)
			if err != nil {
				return err
			}
			if detach {
				if a.jsonOut {
					return printJSON(a.Stdout, job.RawJSON())
				}
				fmt.Fprintf(a.Stdout, "Started package install job %s. Follow it with: agentry package status %s --wait\n", job.ID, job.ID)
				return nil
			}
			fmt.Fprintf(a.Stderr, "Package install job %s\n", job.ID)
			return a.followInstall(cmd.Context(), c, job.ID, 0)
		},
	}
	f := install.Flags()
	f.BoolVar(&req.AllowUnverified, "allow-unverified", false, "approve a source that is not a package signed by a trusted registry key")
	f.BoolVar(&req.AllowHostBuild, "allow-host-build", false, "approve running the source's build script on the gateway host")
	f.BoolVar(&req.Enable, "enable", false, "install the agent enabled")
	f.BoolVar(&req.Overwrite, "overwrite", false, "replace an agent with the same id")
	f.BoolVar(&detach, "detach", false, "start the job and return without waiting")

	var wait bool
	status := &cobra.Command{
		Use:   "status JOB [--wait]",
		Short: "Show a package install job and its progress (--wait follows it to the end)",
		Args:  exactArgs(1, "JOB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			if wait {
				return a.followInstall(cmd.Context(), c, args[0], 0)
			}
			job, err := c.PackageInstall(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, job.RawJSON())
			}
			a.printInstallProgress(job, 0)
			fmt.Fprintf(a.Stdout, "Job %s: %s\n", job.ID, job.Status)
			return nil
		},
	}
	status.Flags().BoolVar(&wait, "wait", false, "follow the job until it ends")
	cmd.AddCommand(install, status)
	return cmd
}

// InstallPollInterval is how often the client asks for a job's progress;
// InstallUnreachableFor is how long it waits for a gateway that does not
// answer (a restart) before it gives up.
var (
	InstallPollInterval   = 300 * time.Millisecond
	InstallUnreachableFor = 3 * time.Minute
)

// followInstall prints a job's new progress lines (to stderr) until it
// ends, then its outcome; a failed job is exit 1.
func (a *App) followInstall(ctx context.Context, c *apiclient.Client, id string, shown int) error {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	var unreachableSince time.Time
	for {
		job, err := c.PackageInstall(ctx, id)
		var apiErr *apiclient.APIError
		switch {
		case err == nil:
			unreachableSince = time.Time{}
			shown = a.printInstallProgress(job, shown)
			if installDone(job) {
				return a.installOutcome(job)
			}
		case errors.As(err, &apiErr) || ctx.Err() != nil:
			return err
		case unreachableSince.IsZero():
			unreachableSince = time.Now()
			fmt.Fprintf(a.Stderr, "  (the gateway does not answer: %v; waiting, the job goes on when it is back)\n", err)
		case time.Since(unreachableSince) > InstallUnreachableFor:
			return fmt.Errorf("the gateway did not answer for %s; follow the job later with: agentry package status %s --wait", InstallUnreachableFor, id)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s did not finish within %s: %w", id, runTimeout, ctx.Err())
		case <-time.After(InstallPollInterval):
		}
	}
}

// printInstallProgress writes the progress lines after the first shown
// ones to stderr and returns how many are shown now.
// installDone: the job succeeded or failed; nothing more will happen.
func installDone(job *apiclient.PackageInstallJob) bool {
	return job.Status == openapi.PackageInstallJobStatusSucceeded || job.Status == openapi.PackageInstallJobStatusFailed
}

func (a *App) printInstallProgress(job *apiclient.PackageInstallJob, shown int) int {
	for _, p := range job.Progress[min(shown, len(job.Progress)):] {
		fmt.Fprintf(a.Stderr, "  %-7s %s\n", p.Step, p.Message)
	}
	return max(shown, len(job.Progress))
}

func (a *App) installOutcome(job *apiclient.PackageInstallJob) error {
	if a.jsonOut {
		if err := printJSON(a.Stdout, job.RawJSON()); err != nil {
			return err
		}
		if job.Error != "" {
			return silentFailure()
		}
		return nil
	}
	if job.Error != "" {
		return fmt.Errorf("package install job %s failed: %s", job.ID, job.Error)
	}
	fmt.Fprintf(a.Stdout, "Installed agent %s from %s (job %s, commit %.12s).\n", job.AgentID, job.Source, job.ID, job.Commit)
	return nil
}
