package gpuportal

import "testing"

func TestFleetGPUState(t *testing.T) {
	healthy, sick := GPU{Healthy: true}, GPU{}
	busy := GPUUse{InstanceID: 7}
	held := GPUUse{ReservationID: 3}
	for _, tc := range []struct {
		node string
		gpu  GPU
		use  GPUUse
		want string
	}{
		{NodeOnline, healthy, GPUUse{}, GPUIdle},
		{NodeOnline, healthy, busy, GPUInUse},
		{NodeOnline, healthy, held, GPUInUse},
		{NodeOnline, sick, GPUUse{}, GPUUnhealthy},
		{NodeOnline, sick, busy, GPUInUse},
		{NodeDraining, healthy, GPUUse{}, GPUDraining},
		{NodeDraining, healthy, busy, GPUInUse},
		{NodeDraining, sick, GPUUse{}, GPUUnhealthy},
		{NodeOffline, healthy, busy, GPUOffline},
		{NodeOffline, sick, GPUUse{}, GPUOffline},
	} {
		if got := FleetGPUState(tc.node, tc.gpu, tc.use); got != tc.want {
			t.Errorf("node %s, healthy %v, use %+v: %s, want %s", tc.node, tc.gpu.Healthy, tc.use, got, tc.want)
		}
	}
}
