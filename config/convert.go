package config

import (
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/pool"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// The conversions of a valid Config into the options of the packages that do the
// work: each value is taken as it is (the option types are the leaves'), and the
// sizes in MiB become bytes.

// Source returns the camera's source, not started, with every option the config
// holds; the caller sets the rest (model input size, callbacks, logger) before
// Start.
func (c Camera) Source() *sources.Camera {
	return &sources.Camera{
		ID:           c.ID,
		Kind:         c.Kind,
		URL:          c.URL,
		Username:     c.Username,
		Password:     c.Password,
		Transport:    c.Transport,
		Decode:       c.Decode,
		Decoder:      c.Decoder,
		Pipeline:     c.Pipeline,
		File:         c.File,
		StallTimeout: c.StallTimeout,
	}
}

// NATSPublisher returns the publisher of the site's events, not started, with
// every option the config holds; the caller sets the rest (the embedded Server,
// Instance, Logger) before Start.
func (c *Config) NATSPublisher() *sinks.Publisher {
	n := c.NATS
	return &sinks.Publisher{
		URL:         n.URL,
		Auth:        n.Auth.sinks(),
		TLS:         sinks.TLS(n.TLS),
		Prefix:      n.SubjectPrefix,
		Site:        c.Site,
		JetStream:   n.JetStream,
		OutboxBytes: n.OutboxMiB << 20,
		Stream: sinks.StreamConfig{
			Name:       n.StreamName(c.Site),
			MaxAge:     n.Stream.MaxAge,
			MaxBytes:   int64(n.Stream.MaxBytesMiB) << 20,
			Duplicates: n.Stream.DuplicateWindow,
		},
	}
}

// NATSServer returns the embedded NATS server, not started, which runs when
// nats.url is "": with JetStream, its store is in StatePath and its domain is
// the JetStream domain. The caller sets Logger before Start.
func (c *Config) NATSServer() (*sinks.Server, error) {
	n := c.NATS
	s := &sinks.Server{
		Listen: n.Listen,
		MQTT:   n.MQTT.Listen,
		Auth:   n.Auth.sinks(),
		TLS:    sinks.TLS(n.TLS),
		Leaf:   sinks.Leaf{URL: n.Leaf.URL, Auth: n.Leaf.Auth.sinks(), TLS: sinks.TLS(n.Leaf.TLS)},
	}
	if n.JetStream {
		dir, err := c.StatePath()
		if err != nil {
			return nil, err
		}
		s.StoreDir, s.Domain = dir, n.JetStreamDomain(c.Site)
	}
	return s, nil
}

// sinks returns the credentials as sinks takes them. PasswordFile and TokenFile
// have been read into Password and Token by Parse.
func (a NATSAuth) sinks() sinks.Auth {
	return sinks.Auth{User: a.User, Password: a.Password, Token: a.Token,
		NKeySeedFile: a.NKeySeedFile, CredentialsFile: a.CredentialsFile}
}

// PoolConfig returns the config of pool i of w, with every option the config holds; the
// caller sets the worker command, environment and logger.
func (w Workers) PoolConfig(i int) pool.Config {
	pc := w.Pools[i]
	return pool.Config{
		Count:    int(pc.Count),
		Sessions: pc.Sessions,
		DetectorOptions: infer.DetectorOptions{
			Model:      w.Model,
			Labels:     w.Labels,
			Library:    w.Library,
			Provider:   pc.Provider,
			Device:     pc.Device,
			Threads:    pc.Threads,
			Spin:       pc.Spin,
			Confidence: w.Confidence,
			IoU:        w.IoU,
			Fallback:   pc.Fallback,
			CUDA: infer.CUDAOptions{
				GPUMemLimit:           int64(pc.CUDA.GPUMemLimitMiB) << 20,
				ArenaExtendStrategy:   pc.CUDA.ArenaExtendStrategy,
				CudnnConvAlgoSearch:   pc.CUDA.CudnnConvAlgoSearch,
				CudnnConvMaxWorkspace: pc.CUDA.CudnnConvMaxWorkspace,
				DeviceIO:              pc.CUDA.DeviceIO,
				Graph:                 pc.CUDA.Graph,
			},
			TensorRT: infer.TensorRTOptions{
				FP16:          pc.TensorRT.FP16,
				INT8:          pc.TensorRT.INT8,
				EngineCache:   pc.TensorRT.EngineCache,
				WorkspaceSize: int64(pc.TensorRT.WorkspaceMiB) << 20,
			},
		},
		JobTimeout:       w.JobTimeout,
		MemoryLimit:      int64(w.MemoryLimitMiB) << 20,
		GPUMemoryLimit:   int64(w.GPUMemoryLimitMiB) << 20,
		GPUMemoryCommand: w.GPUMemoryCommand,
	}
}
