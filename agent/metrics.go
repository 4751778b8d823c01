package agent

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"gpuportal"
)

// gpuMetrics exports GPU telemetry under dcgm-exporter's names and labels
// so existing Grafana dashboards work.
type gpuMetrics struct {
	util, fbUsed, fbFree, temp, power, xid *prometheus.GaugeVec
}

func newGPUMetrics(reg prometheus.Registerer) *gpuMetrics {
	labels := []string{"gpu", "UUID", "modelName", "Hostname"}
	g := func(name, help string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v
	}
	return &gpuMetrics{
		util:   g("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
		fbUsed: g("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
		fbFree: g("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
		temp:   g("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
		power:  g("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
		xid:    g("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered."),
	}
}

func (m *gpuMetrics) update(devices []Device, samples []gpuportal.GPUSample, hostname string) {
	byUUID := map[string]Device{}
	for _, d := range devices {
		byUUID[d.UUID] = d
	}
	for _, s := range samples {
		d := byUUID[s.UUID]
		l := prometheus.Labels{"gpu": strconv.Itoa(d.Index), "UUID": s.UUID, "modelName": d.Name, "Hostname": hostname}
		m.util.With(l).Set(float64(s.UtilizationPercent))
		m.fbUsed.With(l).Set(float64(s.MemoryUsedMiB))
		m.fbFree.With(l).Set(float64(s.MemoryFreeMiB))
		m.temp.With(l).Set(float64(s.TemperatureC))
		m.power.With(l).Set(float64(s.PowerW))
		m.xid.With(l).Set(float64(s.LastXID))
	}
}
