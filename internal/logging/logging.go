// Package logging builds clusterflow's zap logger and bridges it into the Temporal SDK, so
// worker logs carry workflow and activity fields.
package logging

import (
	"fmt"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a logger writing to stderr in the given format ("console" or "json") at the
// given level ("debug", "info", "warn", "error").
func New(format, level string) (*zap.Logger, error) {
	return newLogger(format, level, zapcore.Lock(os.Stderr))
}

// NewFile returns a logger like New's that appends to the file at path, creating it and
// its folder. The file stays open for the life of the process: goroutines of an embedded
// server or SDK can still log after their Stop returns, and a closed file would send zap's
// "write error" to the terminal.
func NewFile(format, level, path string) (*zap.Logger, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// Logs name clusters, members and script output: their owner's alone, older files too.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	l, err := newLogger(format, level, zapcore.Lock(f))
	if err != nil {
		f.Close()
		return nil, err
	}
	// A fatal error ends the process: it must reach the terminal too, not only the file.
	fatal, _ := newLogger(format, "dpanic", zapcore.Lock(os.Stderr))
	return zap.New(zapcore.NewTee(l.Core(), fatal.Core())), nil
}

func newLogger(format, level string, out zapcore.WriteSyncer) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.Set(level); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", level)
	}
	encoderConfig := zap.NewProductionEncoderConfig()
	encoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	switch format {
	case "json":
		encoder = zapcore.NewJSONEncoder(encoderConfig)
	case "console":
		encoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
		encoder = zapcore.NewConsoleEncoder(encoderConfig)
	default:
		return nil, fmt.Errorf("--log-format: %q is not json or console", format)
	}
	return zap.New(zapcore.NewCore(encoder, out, lvl)), nil
}

// SDK adapts a zap logger to the Temporal SDK's logger interface.
func SDK(z *zap.Logger) log.Logger { return sdkLogger{z.WithOptions(zap.AddCallerSkip(1)).Sugar()} }

type sdkLogger struct{ s *zap.SugaredLogger }

func (l sdkLogger) Debug(msg string, keyvals ...any) { l.s.Debugw(msg, keyvals...) }
func (l sdkLogger) Info(msg string, keyvals ...any)  { l.s.Infow(msg, keyvals...) }
func (l sdkLogger) Warn(msg string, keyvals ...any)  { l.s.Warnw(msg, keyvals...) }
func (l sdkLogger) Error(msg string, keyvals ...any) { l.s.Errorw(msg, keyvals...) }

// With lets the SDK attach workflow and activity fields once per logger.
func (l sdkLogger) With(keyvals ...any) log.Logger { return sdkLogger{l.s.With(keyvals...)} }

var _ log.WithLogger = sdkLogger{}
