package fusefs

// UnmountSiblingHostViewWith is UnmountSiblingHostView with its unmount
// call replaced, for tests of the race with the session's own server.
var UnmountSiblingHostViewWith = unmountSiblingHostView
