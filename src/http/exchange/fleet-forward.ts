import { discardBody } from '../../upstream/body.js';
import type { UpstreamResponse } from '../../upstream/client.js';
import { failedBeforeAnswer, failureReason } from '../../upstream/failure.js';
import type { Fleet } from '../../fleet/fleet.js';
import type { FleetServer } from '../../fleet/fleet-server.js';
import type { AnswerWriter } from './answer.js';
import type { Planned } from './ask-planner.js';
import { conversationKeyOf } from './slot-pin.js';

/**
 * A chat request on a fleet (issue 39): sent to its conversation's home
 * server, and when that fails before its first answer byte (connection
 * refused, reset or closed, or a 5xx status) to the next server in the
 * fleet's order, until one answers or none is left. A request whose answer
 * began is never sent again: from the status line on it is this server's
 * answer, relayed as one server's answer is (a stream cut mid-way ends with
 * the format's error event, respond.ts). The last server's answer or error
 * is the client's, whatever it is.
 */
export async function forwardOnFleet(answer: AnswerWriter, planned: Planned, fleet: Fleet, send: (server: FleetServer) => Promise<UpstreamResponse>): Promise<UpstreamResponse> {
  // Every format's conversation has its home server (its KV is there), whether or not its route pins slots.
  const key = conversationKeyOf(answer, planned);
  const servers = await fleet.order(key, planned.context.body.model);
  for (const [place, server] of servers.entries()) {
    const last = place === servers.length - 1;
    server.counters.requests++;
    answer.record.upstreamServer = server.label;
    let response: UpstreamResponse;
    try {
      response = await send(server);
    } catch (error) {
      if (answer.abort.aborted || !failedBeforeAnswer(error)) throw error;
      fleet.failed(server, failureReason(error));
      if (last) throw error;
      answer.request.log.warn({ upstream: server.label, reason: failureReason(error) }, 'fleet: no answer from the server; the request goes to the next one');
      continue;
    }
    if (response.status >= 500 && !last) {
      // Nothing of it reached the client: the status line is all that was read.
      discardBody(response.body);
      fleet.failed(server, `answered ${response.status}`);
      answer.request.log.warn({ upstream: server.label, status: response.status }, 'fleet: the server answered an error status; the request goes to the next one');
      continue;
    }
    fleet.answered(key, server);
    return response;
  }
  // order() always names every server: the loop returns or throws on the last.
  throw new Error('fleet: no server to send to');
}
