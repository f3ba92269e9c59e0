import type { ChatCall } from '../compaction/ports.js';
import { failedBeforeAnswer, failureReason } from '../upstream/failure.js';
import type { Fleet } from './fleet.js';
import type { FleetServer } from './fleet-server.js';

/**
 * compactor's own summary calls on a fleet (issue 39): a suffix summary on
 * its conversation's home server (its prompt extends what that server's slot
 * holds), a prepend summary (a guest: it shares no prefix) on the server the
 * fleet would give a new conversation. Each server's call goes through that
 * server's slots (`callOn`). A call that gets no answer at all goes to the
 * next server, as a turn does; a summary is compactor's own, never a
 * client's answer in part.
 */
export function fleetChat(fleet: Fleet, callOn: (server: FleetServer) => ChatCall): ChatCall {
  return async (body, signal, headers, slot) => {
    const model = typeof body['model'] === 'string' ? body['model'] : '';
    const key = slot?.kind === 'summary' ? slot.key : null;
    const servers = await fleet.order(key, model);
    for (const [place, server] of servers.entries()) {
      server.counters.requests++;
      try {
        return await callOn(server)(body, signal, headers, slot);
      } catch (error) {
        if (signal.aborted || !failedBeforeAnswer(error)) throw error;
        fleet.failed(server, failureReason(error));
        if (place === servers.length - 1) throw error;
      }
    }
    throw new Error('fleet: no server to send to');
  };
}
