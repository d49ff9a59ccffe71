---------------------------------------------------------------------------------------------
-- Rules this plugin implements (docs/rules.md); tests/lua checks this list against the doc.

local FINDING_KINDS = {
  "nagle_hold", "delayed_ack", "r2t_round_trip", "cwnd_limited", "rwnd_limited",
  "retransmission", "target_think", "serialized", "link_limited", "think_or_hold",
  "think_or_network",
}
-- The breakdown part that is each kind's own (finding_kinds.hpp exclusive_ms): over all kinds a
-- command's parts add up to at most its latency, where the findings' lost_ms overlap.
local OWN_PART = { nagle_hold = "nagle", delayed_ack = "delayed_ack", r2t_round_trip = "r2t",
                   cwnd_limited = "cwnd", rwnd_limited = "rwnd", retransmission = "loss",
                   target_think = "think", link_limited = "link", think_or_hold = "think",
                   think_or_network = "think" }

-- Finding kinds of docs/rules.md this plugin does not implement (none; see lua/README.md).
local UNSUPPORTED_KINDS = {}

-- Same texts as fix_for() in engine/src/advice/summary.cpp.
local function fix_for(kind, side)
  if kind == "nagle_hold" then
    if side == "target" then
      return "set TCP_NODELAY on the target's socket, or send the final Data-In and the SCSI " ..
             "Response in one write (or put the status in the final Data-In, S bit)"
    end
    return "set TCP_NODELAY on the initiator's socket, or send the command header and its " ..
           "immediate data in one write (writev/MSG_MORE)"
  elseif kind == "delayed_ack" then
    if side == "initiator" then
      return "quick-ACK on the initiator (TCP_QUICKACK after each receive, or a lower " ..
             "delayed-ACK timeout); removing the Nagle hold on the target removes the wait"
    end
    return "quick-ACK on the target (TCP_QUICKACK after each receive); removing the Nagle " ..
           "hold on the initiator removes the wait"
  elseif kind == "r2t_round_trip" then
    return "negotiate ImmediateData=Yes and InitialR2T=No, with FirstBurstLength at least the " ..
           "write size, so write data travels with the command"
  elseif kind == "cwnd_limited" then
    return "keep the congestion window open between bursts: net.ipv4.tcp_slow_start_after_idle=0 " ..
           "on the sender, and a larger initial window (ip route ... initcwnd)"
  elseif kind == "rwnd_limited" then
    if side == "target" then
      return "raise the initiator's receive buffer (net.ipv4.tcp_rmem, window scaling)"
    end
    return "raise the target's receive buffer (net.ipv4.tcp_rmem, window scaling)"
  elseif kind == "retransmission" then
    return "find the loss on the path (interface errors, drops, duplex, MTU); losses cost a " ..
           "timeout or a round trip each"
  elseif kind == "target_think" then
    return "the target itself is slow (backing store, CPU, locking): look at the target's disks " ..
           "and its own latency, not the network"
  elseif kind == "serialized" then
    return "keep more commands outstanding (queue depth > 1: more I/O threads, async I/O, a " ..
           "larger nr_requests/queue depth) or larger transfers, so round trips overlap"
  elseif kind == "think_or_hold" then
    return "capture at the target (or on its host), from the connection's start or with TCP timestamps " ..
           "on, to tell its own time from a reply held until the initiator's ACK reached it; if held, set " ..
           "TCP_NODELAY on the target's socket or send the final Data-In and the SCSI Response in one write"
  elseif kind == "think_or_network" then
    return "capture from the connection's start, with TCP timestamps on, or at the target (or on its host), " ..
           "to tell the target's own time from the round trip; or compare the target's own latency statistics " ..
           "with the command's"
  elseif kind == "link_limited" then
    return "the transfer is bound by the link's rate: a faster link or path, or fewer bytes; larger " ..
           "blocks, TCP tuning and the target do not help"
  end
  return ""
end
