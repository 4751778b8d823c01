package agent

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"gpuportal"
)

// gpuMetrics exports GPU telemetry under dcgm-exporter's names and labels
// so existing Grafana dashboards work.
type gpuMetrics struct {
	util, fbUsed, fbFree, temp, power, xid, smClock, eccSBE, eccDBE *prometheus.GaugeVec
}

func newGPUMetrics(reg prometheus.Registerer) *gpuMetrics {
	labels := []string{"gpu", "UUID", "device", "modelName", "Hostname"}
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
		// The panels the round-3 dashboard left empty, and GPU health.
		smClock: g("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."),
		eccSBE:  g("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors."),
		eccDBE:  g("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors."),
	}
}

func (m *gpuMetrics) update(devices []Device, samples []gpuportal.GPUSample, hostname string) {
	byUUID := map[string]Device{}
	for _, d := range devices {
		byUUID[d.UUID] = d
	}
	for _, s := range samples {
		d := byUUID[s.UUID]
		l := prometheus.Labels{"gpu": strconv.Itoa(d.Index), "UUID": s.UUID, "device": "nvidia" + strconv.Itoa(d.Index), "modelName": d.Name, "Hostname": hostname}
		m.util.With(l).Set(float64(s.UtilizationPercent))
		m.fbUsed.With(l).Set(float64(s.MemoryUsedMiB))
		m.fbFree.With(l).Set(float64(s.MemoryFreeMiB))
		m.temp.With(l).Set(float64(s.TemperatureC))
		m.power.With(l).Set(float64(s.PowerW))
		m.xid.With(l).Set(float64(s.LastXID))
		m.smClock.With(l).Set(float64(s.SMClockMHz))
		m.eccSBE.With(l).Set(float64(s.ECCCorrected))
		m.eccDBE.With(l).Set(float64(s.ECCUncorrected))
	}
}
