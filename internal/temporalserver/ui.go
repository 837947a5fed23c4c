package temporalserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	uiapi "github.com/temporalio/ui-server/v2/server/api"
	uiauth "github.com/temporalio/ui-server/v2/server/auth"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uicors "github.com/temporalio/ui-server/v2/server/cors"
	uicsrf "github.com/temporalio/ui-server/v2/server/csrf"
	uiheaders "github.com/temporalio/ui-server/v2/server/headers"
	uiroute "github.com/temporalio/ui-server/v2/server/route"
	uiassets "github.com/temporalio/ui-server/v2/ui"
)

// uiServer serves the Temporal Web UI on a listener we bound ourselves.
//
// Why not uiserver.NewServer(...).Start(): Start binds the port itself and,
// when that fails, calls echo's Logger.Fatal, which exits the whole process.
// Binding first and serving the same echo routes on our listener turns a busy
// port into an error (no window between check and bind) and lets Stop drain.
// The handler below mirrors NewServer of ui-server v2.55.0 (server/server.go);
// re-check it when bumping ui-server.
type uiServer struct {
	http *http.Server
	done chan struct{}
}

func startUI(ln net.Listener, frontendAddr, namespace string, logger *slog.Logger) (*uiServer, error) {
	handler, err := newUIHandler(ln.Addr().(*net.TCPAddr), frontendAddr, namespace)
	if err != nil {
		return nil, err
	}
	s := &uiServer{
		http: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("temporal web UI stopped serving", "error", err)
		}
	}()
	return s, nil
}

// stop drains requests until ctx ends, then closes what is left.
func (s *uiServer) stop(ctx context.Context) {
	if err := s.http.Shutdown(ctx); err != nil {
		_ = s.http.Close()
	}
	<-s.done
}

func newUIHandler(addr *net.TCPAddr, frontendAddr, namespace string) (http.Handler, error) {
	cfg := &uiconfig.Config{
		Host:                addr.IP.String(),
		Port:                addr.Port,
		TemporalGRPCAddress: frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		// Plain HTTP on loopback: a Secure cookie would never be sent back.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
		// The gateway may run offline; don't phone home for release news.
		DisableNewsFetch: true,
	}
	cfgProvider, err := uiconfig.NewConfigProviderWithRefresh(cfg)
	if err != nil {
		return nil, fmt.Errorf("temporal web UI config: %w", err)
	}
	apiMiddleware := []uiapi.Middleware{
		uiheaders.WithForwardHeaders([]string{uiauth.AuthorizationExtrasHeader, "Caller-Type"}),
	}

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.Use(middleware.Recover())
	e.Use(middleware.Gzip())
	e.Use(uicors.CORSMiddleware(uicors.CORSConfig{
		AllowHeaders: []string{
			echo.HeaderOrigin, echo.HeaderContentType, echo.HeaderAccept,
			echo.HeaderXCSRFToken, echo.HeaderAuthorization, uiauth.AuthorizationExtrasHeader,
			"Caller-Type",
		},
		AllowCredentials: true,
		ConfigProvider:   cfgProvider,
	}))
	e.Use(middleware.Secure())
	cookieSecure := !cfg.CORS.CookieInsecure
	e.Use(uicsrf.EnsureTokenCookie(cookieSecure))
	e.Use(middleware.CSRFWithConfig(uicsrf.MiddlewareConfig(cfgProvider, cookieSecure)))

	e.Pre(uiroute.PublicPath(cfg.PublicPath))
	uiroute.SetHealthRoute(e)
	if err := uiroute.SetAPIRoutes(e, cfgProvider, apiMiddleware); err != nil {
		return nil, fmt.Errorf("temporal web UI api routes: %w", err)
	}
	uiroute.SetAuthRoutes(e, cfgProvider)

	assets, err := uiassets.Assets()
	if err != nil {
		return nil, fmt.Errorf("temporal web UI assets: %w", err)
	}
	assets, err = fs.Sub(assets, "local")
	if err != nil {
		return nil, fmt.Errorf("temporal web UI assets: %w", err)
	}
	if err := uiroute.SetUIRoutes(e, cfg.PublicPath, assets, cfgProvider); err != nil {
		return nil, fmt.Errorf("temporal web UI routes: %w", err)
	}
	uiroute.SetRenderRoute(e, "/")
	return e, nil
}
