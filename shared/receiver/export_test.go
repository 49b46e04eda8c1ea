package receiver

// RejectionQueue is the background writer's queue length: a test fills it
// with refusals, as a flood does, to see the records beyond it dropped.
const RejectionQueue = rejectionQueue
